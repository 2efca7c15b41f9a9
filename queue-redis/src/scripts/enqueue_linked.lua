-- Linked enqueue (standalone Redis): adds a batch whose jobs name
-- dependencies, over every queue it touches, in input order, as one
-- step. First checks every dependency on a job enqueued before (for every
-- job, its key live or not): one neither live nor in history refuses the
-- batch, as does one that finished otherwise than completed for a job
-- that does not run anyway; nothing is written then. Then adds each job
-- as enqueue.lua does (a unique key already live returns its job's id,
-- and that job keeps its own dependencies), records it among the
-- dependants of each distinct dependency (workflow.lua's keys), and
-- leaves it waiting (at WAITING_AT in DELAYED) for those that are live.
-- A job joining a batch (its callback's id given) is refused, the whole
-- batch with it, unless that callback is waiting; an added job that joins
-- becomes one more dependency of the callback, which waits for it too.
-- KEYS: the prefixes of the queues of the jobs and of their dependencies.
-- ARGV: now, wake-up channel, k, the names of the k queues of KEYS, then
-- per job: the position of its queue in KEYS, the nine fields of
-- enqueue.lua (id, priority, unique key, max attempts, schedule kind and
-- value, payload, trace context, group key), on_failure (run | cancel),
-- the callback it joins (the position of its queue in KEYS, 0 for none,
-- and its padded id, '' for none), n, then n dependencies, each: the position of its queue in KEYS, kind
-- (j: a job enqueued before | b: a job of this batch), and its padded id
-- (j) or its position in the batch from 1 (b).
-- Returns {'unknown', id}, {'failed', id, status} or {'closed', id} when
-- refused, else
-- {'ok', position, existing id, ...} for the jobs whose key was live
-- (every other job was added under the id it came with).
local now = clock(ARGV[1])
local now_text = fmt(now)
local channel = ARGV[2]
local names = {}
local k = tonumber(ARGV[3])
for q = 1, k do
  names[q] = ARGV[3 + q]
end
local jobs = {}
local i = 4 + k
while i <= #ARGV do
  local job = {q = tonumber(ARGV[i]), id = ARGV[i + 1], priority = ARGV[i + 2],
    key = ARGV[i + 3], max_attempts = ARGV[i + 4], kind = ARGV[i + 5], value = ARGV[i + 6],
    payload = ARGV[i + 7], trace = ARGV[i + 8], group = ARGV[i + 9],
    on_failure = ARGV[i + 10], join_q = tonumber(ARGV[i + 11]), join = ARGV[i + 12], deps = {}}
  local n = tonumber(ARGV[i + 13])
  i = i + 14
  for d = 1, n do
    job.deps[d] = {q = tonumber(ARGV[i]), kind = ARGV[i + 1], value = ARGV[i + 2]}
    i = i + 3
  end
  jobs[#jobs + 1] = job
end

-- The check: each callback joined is waiting; each dependency on a job
-- enqueued before is live (true) or finished (its status).
local stands = {}
for _, job in ipairs(jobs) do
  if job.join ~= '' and redis.call('EXISTS', KEYS[job.join_q] .. ':waits:' .. job.join) == 0 then
    return {'closed', job.join}
  end
  for _, dep in ipairs(job.deps) do
    if dep.kind == 'j' then
      local id = dep.value
      if stands[id] == nil then
        local prefix = KEYS[dep.q]
        if redis.call('EXISTS', prefix .. ':job:' .. id) == 1 then
          stands[id] = true
        else
          local status = redis.call('HGET', prefix .. ':hist:' .. id, 'status')
          if not status then
            return {'unknown', id}
          end
          stands[id] = status
        end
      end
      local status = stands[id]
      if status ~= true and status ~= 'completed' and job.on_failure ~= 'run' then
        return {'failed', id, status}
      end
    end
  end
end

-- Records job `id` (of the current queue, named `name`) among the
-- dependants of each of its distinct dependencies `distinct` ({id, q},
-- ascending), and returns those still live.
local function link(id, name, distinct)
  local waits = {}
  for _, dep in ipairs(distinct) do
    local prefix = KEYS[dep.q]
    redis.call('HSET', prefix .. ':dependants:' .. dep.id, id, name)
    local key = prefix .. ':job:' .. dep.id
    if redis.call('EXISTS', key) == 1 then
      redis.call('HSET', key, 'dependants', '1')
      waits[#waits + 1] = dep.id
    end
  end
  return waits
end

local out = {'ok'}
local ids = {}
local woken = {}
for position, job in ipairs(jobs) do
  use_queue(KEYS[job.q])
  local existing = false
  if job.key ~= '' then
    existing = redis.call('HGET', UNIQUE, job.key)
  end
  if existing then
    ids[position] = existing
    out[#out + 1] = tostring(position)
    out[#out + 1] = existing
  else
    local id = job.id
    ids[position] = id
    local at
    if job.kind == 'now' then
      at = now_text
    elseif job.kind == 'after' then
      at = fmt(now + tonumber(job.value))
    else
      at = job.value
    end
    local key = job_key(id)
    redis.call('HSET', key, 'priority', job.priority, 'payload', job.payload, 'attempts', '0',
      'max_attempts', job.max_attempts, 'available_at', at, 'created_at', now_text,
      'updated_at', now_text)
    if job.key ~= '' then
      redis.call('HSET', key, 'unique_key', job.key)
      redis.call('HSET', UNIQUE, job.key, id)
    end
    if job.trace ~= '' then
      redis.call('HSET', key, 'trace_context', job.trace)
    end
    if job.group ~= '' then
      redis.call('HSET', key, 'group_key', job.group)
    end
    local waits = {}
    if #job.deps > 0 then
      local seen, distinct = {}, {}
      for _, dep in ipairs(job.deps) do
        local dep_id = dep.value
        if dep.kind == 'b' then
          dep_id = ids[tonumber(dep.value)]
        end
        if not seen[dep_id] then
          seen[dep_id] = true
          distinct[#distinct + 1] = {id = dep_id, q = dep.q}
        end
      end
      table.sort(distinct, function(a, b)
        return a.id < b.id
      end)
      local listed = {}
      for d, dep in ipairs(distinct) do
        listed[d] = dep.id
      end
      redis.call('HSET', key, 'depends_on', table.concat(listed, ','))
      if job.on_failure == 'run' then
        redis.call('HSET', key, 'on_failure', 'run')
      end
      waits = link(id, names[job.q], distinct)
    end
    if job.join ~= '' then
      -- The callback, waiting (checked above), waits for this job too.
      local callback = KEYS[job.join_q]
      redis.call('HSET', P .. ':dependants:' .. id, job.join, names[job.join_q])
      redis.call('HSET', key, 'dependants', '1')
      redis.call('SADD', callback .. ':waits:' .. job.join, id)
      local callback_key = callback .. ':job:' .. job.join
      local listed = redis.call('HGET', callback_key, 'depends_on')
      if listed and listed ~= '' then
        listed = listed .. ',' .. id
      else
        listed = id
      end
      redis.call('HSET', callback_key, 'depends_on', listed)
    end
    if #waits > 0 then
      redis.call('HSET', key, 'available_at', WAITING_AT, 'run_at', at)
      bulk('SADD', P .. ':waits:' .. id, waits)
      redis.call('ZADD', DELAYED, WAITING_AT, id)
      redis.call('ZADD', IDS_DELAYED, 0, id)
    else
      place(id, job.priority, at, now)
      woken[job.q] = true
    end
  end
end
for q in pairs(woken) do
  redis.call('PUBLISH', channel, names[q])
end
return out
