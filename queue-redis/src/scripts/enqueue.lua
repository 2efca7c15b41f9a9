-- Enqueue: adds jobs to one queue in input order; a unique key already
-- live returns its job's id. Publishes the queue's name once when a job
-- was added.
-- ARGV: now, channel, queue name, then per job: id, priority, unique key
-- ('' for none), max attempts, schedule kind (now | after | at), schedule
-- value (micros: a delay or an instant), payload, trace context ('' for
-- none), group key ('' for none).
-- Returns {position, existing id, ...} for the jobs whose key was live
-- (positions count this script's jobs from 1); every other job was added
-- under the id it came with. Only the exceptions travel back: a reply per
-- job costs the server as much as a sorted-set insert.
local now = clock(ARGV[1])
local now_text = fmt(now)
local out = {}
local added = false
local ready, delayed, ready_ids, delayed_ids = {}, {}, {}, {}
-- A fair queue's pending jobs per group ('' for none), as READY entries.
local fair = is_fair() and {}
-- Per-job work is what a batch costs the server: each priority's ready
-- score and level are worked out once (with the oldest available_at
-- among its jobs, for LEVELS), a job due now reuses the padded clock, and
-- job keys share one prefix.
local levels = {}
local now_member = pad(now_text) .. ':'
local job_prefix = P .. ':job:'
local i = 4
local position = 0
while i <= #ARGV do
  local id, priority, key, max_attempts = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local kind, value, payload, trace = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local group = ARGV[i + 8]
  i = i + 9
  position = position + 1
  local existing = false
  if key ~= '' then
    existing = redis.call('HGET', UNIQUE, key)
  end
  if existing then
    out[#out + 1] = tostring(position)
    out[#out + 1] = existing
  else
    local at
    if kind == 'now' then
      at = now_text
    elseif kind == 'after' then
      at = fmt(now + tonumber(value))
    else
      at = value
    end
    local k = job_prefix .. id
    if key ~= '' then
      redis.call('HSET', k, 'priority', priority, 'payload', payload, 'attempts', '0',
        'max_attempts', max_attempts, 'available_at', at, 'created_at', now_text,
        'updated_at', now_text, 'unique_key', key)
      redis.call('HSET', UNIQUE, key, id)
    else
      redis.call('HSET', k, 'priority', priority, 'payload', payload, 'attempts', '0',
        'max_attempts', max_attempts, 'available_at', at, 'created_at', now_text,
        'updated_at', now_text)
    end
    if trace ~= '' then
      redis.call('HSET', k, 'trace_context', trace)
    end
    if group ~= '' then
      redis.call('HSET', k, 'group_key', group)
    end
    -- Indexes are written below, in bulk (as `place` would).
    if kind == 'now' or tonumber(at) <= now then
      local level = levels[priority]
      if not level then
        local score = -tonumber(priority)
        level = {score = fmt(score), name = level_name(score), oldest = at}
        levels[priority] = level
      elseif kind ~= 'now' and tonumber(at) < tonumber(level.oldest) then
        -- (A job due now is never older than the level's first.)
        level.oldest = at
      end
      ready[#ready + 1] = level.score
      ready_ids[#ready_ids + 1] = 0
      ready_ids[#ready_ids + 1] = id
      if kind == 'now' then
        ready[#ready + 1] = now_member .. id
      else
        ready[#ready + 1] = ready_member(at, id)
      end
      if fair then
        local list = fair[group] or {}
        fair[group] = list
        list[#list + 1] = level.score
        list[#list + 1] = ready[#ready]
      end
    else
      delayed[#delayed + 1] = at
      delayed[#delayed + 1] = id
      delayed_ids[#delayed_ids + 1] = 0
      delayed_ids[#delayed_ids + 1] = id
    end
    added = true
  end
end
bulk('ZADD', READY, ready)
bulk('ZADD', IDS_READY, ready_ids)
for group, list in pairs(fair or {}) do
  fair_add(group ~= '' and group, list)
end
for _, level in pairs(levels) do
  level_add(level.name, level.oldest)
end
bulk('ZADD', DELAYED, delayed)
bulk('ZADD', IDS_DELAYED, delayed_ids)
if added then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return out
