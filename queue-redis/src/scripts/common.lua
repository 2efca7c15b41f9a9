-- Shared by every per-queue script (prepended to each one).
-- KEYS[1] is the queue's key prefix `<namespace>:{<queue>}`: every key
-- below starts with it, so the whole script runs on one cluster slot.
-- ARGV[1] is the manual clock in microseconds, or '' for the server's TIME.
-- Ids travel as 19-digit zero-padded decimal strings and are never used
-- in arithmetic (Lua numbers are doubles).

-- The keys of the queue the script is working on: KEYS[1]'s, until a
-- workflow step (`use_queue`, standalone Redis only) moves to the queue
-- of a job that waits for a finished one, and back.
local P
local READY       -- pending: score -priority, member pad(available_at):id
local LEVELS      -- pending: member a level of READY (its score), score its oldest available_at
local DELAYED     -- scheduled, and waiting at WAITING_AT: score available_at, member id
local LEASED      -- running and stalled: score lease_until, member id
-- The same jobs by id, for the listings (score 0, member id: lexical =
-- numeric, walked with ZREVRANGEBYLEX): each holds exactly the jobs of
-- its index above, and every write to one is mirrored in the other.
local IDS_READY, IDS_DELAYED, IDS_LEASED
local UNIQUE      -- hash: unique key -> id
local PAUSED      -- exists while the queue is paused
local CONFIG      -- hash: the queue's limits and token bucket (absent: none)
local SCHEDULES   -- hash: schedule -> last fire ':' next fire (micros)
local GROUP_LIMITS -- hash: group key -> that group's own limit
-- Fair claiming between groups (P:config's fair_groups): while the queue is
-- fair, its pending jobs are also filed per group, as in READY.
local FAIR_GROUPS -- the group keys with pending jobs (score 0, lexical)
local FAIR_NONE   -- the pending jobs without a group key
local FAIR_GROUP  -- ..group: that group's pending jobs
local TURNS       -- hash: group key ('' for none) -> its turn
local CLAIMS      -- jobs claims took from the queue while it was fair
-- History, per status (completed, dead_letter, discarded, cancelled):
local HIST_IDS    -- ..':'..status: score 0, member id (lexical = numeric)
local HIST_FIN    -- ..':'..status: score finished_at, member id
-- Whether the queue claims fairly between groups (see `is_fair`).
local fair_flag = nil

-- Points every key above at the queue with key prefix `prefix`.
local function use_queue(prefix)
  P = prefix
  READY = P .. ':ready'
  LEVELS = P .. ':levels'
  DELAYED = P .. ':delayed'
  LEASED = P .. ':leased'
  IDS_READY = P .. ':ids:ready'
  IDS_DELAYED = P .. ':ids:delayed'
  IDS_LEASED = P .. ':ids:leased'
  UNIQUE = P .. ':unique'
  PAUSED = P .. ':paused'
  CONFIG = P .. ':config'
  SCHEDULES = P .. ':schedules'
  GROUP_LIMITS = P .. ':group_limits'
  FAIR_GROUPS = P .. ':fair:groups'
  FAIR_NONE = P .. ':fair:none'
  FAIR_GROUP = P .. ':fair:g:'
  TURNS = P .. ':turns'
  CLAIMS = P .. ':claims'
  HIST_IDS = P .. ':hist:ids'
  HIST_FIN = P .. ':hist:fin'
  fair_flag = nil
end
use_queue(KEYS[1])

local STATUSES = {'completed', 'dead_letter', 'discarded', 'cancelled'}

local PROMOTE_CAP = 10000

-- Workflows (standalone Redis): the available_at of a job waiting for
-- its dependencies (queue_core::waiting_at, later than any enqueue may
-- ask for), with which it sits in DELAYED, never due; as a number (a
-- double, which tells it from max_instant, a second earlier).
local WAITING_AT = '253402300799999999'
local WAITING_FROM = tonumber(WAITING_AT)
-- The jobs `archive` moved to history that have dependants (their hash
-- holds `dependants`), as {prefix, id, status}: what workflow.lua's
-- `settle` lets their dependants know of, at the end of the script.
local finished = {}

local function is_waiting(at)
  return tonumber(at) >= WAITING_FROM
end

local function fmt(n)
  return string.format('%.0f', n)
end

-- Calls `command` on `key` with the items of `list` as arguments, in
-- chunks (Lua's unpack has a limit).
local function bulk(command, key, list)
  local step = 2000
  for i = 1, #list, step do
    redis.call(command, key, unpack(list, i, math.min(i + step - 1, #list)))
  end
end

local function pad(s)
  return string.rep('0', 19 - #s) .. s
end

local function job_key(id)
  return P .. ':job:' .. id
end

local function hist_key(id)
  return P .. ':hist:' .. id
end

local function ready_member(at, id)
  return pad(at) .. ':' .. id
end

local function id_of_ready(member)
  return string.sub(member, 21)
end

-- The member of LEVELS for READY score `score` (text or number): the
-- score as an integer, 0 however the zero is signed.
local function level_name(score)
  local n = tonumber(score)
  if n == 0 then
    return '0'
  end
  return fmt(n)
end

-- Records that READY level `level` holds a job available at `at` (LT:
-- keeps an older one; adds the level when it is new).
local function level_add(level, at)
  redis.call('ZADD', LEVELS, 'LT', at, level)
end

-- Sets READY level `level`'s oldest available_at again after jobs left
-- it: its first member's (members start with it), or drops the level.
local function level_refresh(level)
  local first = redis.call('ZRANGE', READY, level, level, 'BYSCORE', 'LIMIT', 0, 1)
  if first[1] then
    redis.call('ZADD', LEVELS, tonumber(string.sub(first[1], 1, 19)), level)
  else
    redis.call('ZREM', LEVELS, level)
  end
end

-- Whether the queue claims fairly between groups (read once a script
-- and queue; only configure_queue changes it).
local function is_fair()
  if fair_flag == nil then
    fair_flag = redis.call('HEXISTS', CONFIG, 'fair_groups') == 1
  end
  return fair_flag
end

-- The key of the pending jobs of `group` (false: no group key) of a fair queue.
local function fair_set(group)
  if group then
    return FAIR_GROUP .. group
  end
  return FAIR_NONE
end

-- Files READY entries ({score, member, ...}) of jobs of `group` under it.
local function fair_add(group, entries)
  if #entries == 0 then
    return
  end
  bulk('ZADD', fair_set(group), entries)
  if group then
    redis.call('ZADD', FAIR_GROUPS, 0, group)
  end
end

-- Takes READY member `member` of a job of `group` out of its group's set.
local function fair_remove(group, member)
  local set = fair_set(group)
  redis.call('ZREM', set, member)
  if group and redis.call('EXISTS', set) == 0 then
    redis.call('ZREM', FAIR_GROUPS, group)
  end
end

-- Makes an unheld job claimable.
local function to_ready(id, priority, at)
  local score = -tonumber(priority)
  local member = ready_member(at, id)
  redis.call('ZADD', READY, fmt(score), member)
  redis.call('ZADD', IDS_READY, 0, id)
  level_add(level_name(score), at)
  if is_fair() then
    fair_add(redis.call('HGET', job_key(id), 'group_key'), {fmt(score), member})
  end
end

-- Files an unheld job under pending or scheduled by its available_at.
local function place(id, priority, at, now)
  if tonumber(at) <= now then
    to_ready(id, priority, at)
  else
    redis.call('ZADD', DELAYED, at, id)
    redis.call('ZADD', IDS_DELAYED, 0, id)
  end
end

-- Removes a job from every live index.
local function unplace(id, at)
  local member = ready_member(at, id)
  local score = redis.call('ZSCORE', READY, member)
  if score then
    redis.call('ZREM', READY, member)
    redis.call('ZREM', IDS_READY, id)
    level_refresh(level_name(score))
    if is_fair() then
      fair_remove(redis.call('HGET', job_key(id), 'group_key'), member)
    end
  end
  if redis.call('ZREM', DELAYED, id) == 1 then
    redis.call('ZREM', IDS_DELAYED, id)
  end
  if redis.call('ZREM', LEASED, id) == 1 then
    redis.call('ZREM', IDS_LEASED, id)
  end
end

-- Moves scheduled jobs that came due to pending, earliest first.
local function promote(now)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', fmt(now), 'LIMIT', 0, PROMOTE_CAP)
  for _, id in ipairs(due) do
    local f = redis.call('HMGET', job_key(id), 'priority', 'available_at')
    redis.call('ZREM', DELAYED, id)
    redis.call('ZREM', IDS_DELAYED, id)
    if f[1] then
      to_ready(id, f[1], f[2])
    end
  end
end

-- True when (id, worker, attempt) is the job's current lease.
local function holds(id, worker, attempt)
  local f = redis.call('HMGET', job_key(id), 'locked_by', 'attempts', 'lease_until')
  return f[1] == worker and f[2] == attempt and f[3] ~= false
end

-- As `holds`, and when it does, also the fields `archive` reads (one
-- read for both: each call into Redis costs microseconds); else false.
local function held_row(id, worker, attempt)
  local f = redis.call('HMGET', job_key(id), 'locked_by', 'attempts', 'lease_until',
    'unique_key', 'available_at', 'created_at', 'dependants')
  if f[1] == worker and f[2] == attempt and f[3] ~= false then
    return {f[4], f[5], f[6], f[7]}
  end
  return false
end

-- The live job as {id, field, value, ...}, or false.
local function read_job(id)
  local fields = redis.call('HGETALL', job_key(id))
  if #fields == 0 then
    return false
  end
  table.insert(fields, 1, id)
  return fields
end

-- Clears the lease of a held job (indexes are the caller's business).
local function clear_lease(id)
  redis.call('HDEL', job_key(id), 'lease_until', 'locked_by')
  redis.call('ZREM', LEASED, id)
  redis.call('ZREM', IDS_LEASED, id)
end

-- Moves live job `id` to history with `status`: the job's hash is renamed
-- to the history row (its payload is not copied) and gains status,
-- finished_at and, when set, result, last_error (false keeps the job's
-- own) and processed_by; `held` says the job is leased (only the lease
-- index needs cleaning). With `sink` (see `new_sink`), the index writes
-- are collected there for `flush` instead of made one by one; `row`, when
-- given, is the job's unique_key, available_at, created_at and dependants
-- as read by `held_row`. A job with dependants (see `finished`) is noted for
-- `settle`; a waiting one forgets what it waited for. Returns false when
-- the job is not live.
local function archive(id, status, result, last_error, processed_by, now, held, sink, row)
  local key = job_key(id)
  local f = row or redis.call('HMGET', key, 'unique_key', 'available_at', 'created_at',
    'dependants')
  if not f[3] then
    return false
  end
  if held and sink then
    sink.unleased[#sink.unleased + 1] = id
  elseif held then
    redis.call('ZREM', LEASED, id)
    redis.call('ZREM', IDS_LEASED, id)
  else
    unplace(id, f[2])
    if is_waiting(f[2]) then
      redis.call('DEL', P .. ':waits:' .. id)
    end
  end
  if f[4] then
    finished[#finished + 1] = {prefix = P, id = id, status = status}
  end
  if f[1] and redis.call('HGET', UNIQUE, f[1]) == id then
    redis.call('HDEL', UNIQUE, f[1])
  end
  local h = hist_key(id)
  redis.call('RENAME', key, h)
  local set = {'status', status, 'finished_at', fmt(now)}
  if result then
    set[#set + 1] = 'result'
    set[#set + 1] = result
  end
  if last_error then
    set[#set + 1] = 'last_error'
    set[#set + 1] = last_error
  end
  if processed_by then
    set[#set + 1] = 'processed_by'
    set[#set + 1] = processed_by
  end
  redis.call('HSET', h, unpack(set))
  if sink then
    local ids, fin = sink.ids[status], sink.fin[status]
    ids[#ids + 1] = 0
    ids[#ids + 1] = id
    fin[#fin + 1] = fmt(now)
    fin[#fin + 1] = id
  else
    redis.call('ZADD', HIST_IDS .. ':' .. status, 0, id)
    redis.call('ZADD', HIST_FIN .. ':' .. status, fmt(now), id)
  end
  return true
end

-- A place for `archive` to collect index writes, made by `flush`.
local function new_sink()
  local sink = {unleased = {}, ids = {}, fin = {}}
  for _, status in ipairs(STATUSES) do
    sink.ids[status] = {}
    sink.fin[status] = {}
  end
  return sink
end

-- Makes the index writes collected in `sink`, a few commands in all.
local function flush(sink)
  bulk('ZREM', LEASED, sink.unleased)
  bulk('ZREM', IDS_LEASED, sink.unleased)
  for _, status in ipairs(STATUSES) do
    bulk('ZADD', HIST_IDS .. ':' .. status, sink.ids[status])
    bulk('ZADD', HIST_FIN .. ':' .. status, sink.fin[status])
  end
end

-- Deletes history row `id` of `status` and its index entries.
local function forget(id, status)
  redis.call('DEL', hist_key(id))
  redis.call('ZREM', HIST_IDS .. ':' .. status, id)
  redis.call('ZREM', HIST_FIN .. ':' .. status, id)
end

-- The `n` oldest history rows finished before `cutoff`, of `status` (or
-- of any when ''), as {{id, finished_at}, ...} by finished_at then id.
local function oldest_history(status, cutoff, n)
  local statuses = STATUSES
  if status ~= '' then
    statuses = {status}
  end
  local all = {}
  for _, s in ipairs(statuses) do
    local found = redis.call('ZRANGEBYSCORE', HIST_FIN .. ':' .. s, '-inf', '(' .. fmt(cutoff),
      'WITHSCORES', 'LIMIT', 0, n)
    for i = 1, #found, 2 do
      all[#all + 1] = {found[i], tonumber(found[i + 1])}
    end
  end
  table.sort(all, function(a, b)
    if a[2] ~= b[2] then
      return a[2] < b[2]
    end
    return a[1] < b[1]
  end)
  local out = {}
  for i = 1, math.min(n, #all) do
    out[i] = all[i]
  end
  return out
end

-- How many jobs a claim may take from the queue at `now` under its
-- limits (queue-core's QueueLimits::allowance): the concurrency limit less
-- the leases held (running and stalled), and the bucket's whole tokens
-- after refilling at the rate, up to the burst, since it was stored.
-- Returns the allowance (false: no limit) and the refilled bucket (false:
-- no rate), which `take_tokens` stores after the claim.
local function allowance(now)
  local c = redis.call('HMGET', CONFIG, 'concurrency', 'rate', 'burst', 'tokens', 'refilled_at')
  local allowed = false
  if c[1] then
    allowed = math.max(0, tonumber(c[1]) - redis.call('ZCARD', LEASED))
  end
  local bucket = false
  if c[2] then
    local rate, burst = tonumber(c[2]), tonumber(c[3])
    local tokens, at = burst, now
    if c[4] and c[5] then
      local stored, stored_at = tonumber(c[4]), tonumber(c[5])
      -- A clock that went back adds nothing.
      local elapsed = math.max(0, now - stored_at) / 1000000
      tokens = math.max(0, math.min(stored + elapsed * rate, burst))
      at = math.max(now, stored_at)
    end
    bucket = {tokens = tokens, at = at}
    -- A hair of float error is forgiven, as in Rust.
    local whole = math.floor(tokens + 1e-9)
    if not allowed or whole < allowed then
      allowed = whole
    end
  end
  return allowed, bucket
end

-- Stores the bucket after a claim took `taken` jobs (nothing to store when
-- it took none: a later refill computes the same tokens).
local function take_tokens(bucket, taken)
  if bucket and taken > 0 then
    redis.call('HSET', CONFIG, 'tokens', string.format('%.17g', math.max(0, bucket.tokens - taken)),
      'refilled_at', fmt(bucket.at))
  end
end

-- The group slots of a claim (queue-core's GroupSlots): each group's limit
-- (its own in GROUP_LIMITS, else the queue's group_concurrency) and the
-- leases its jobs hold, counted from the queue's leased jobs (running and
-- stalled, until reclaim) and never kept as a counter, so every way a
-- lease ends gives its slot back. False when no group of the queue is
-- limited (a claim then counts nothing).
local function group_slots()
  local default = redis.call('HGET', CONFIG, 'group_concurrency')
  local own = redis.call('HGETALL', GROUP_LIMITS)
  if not default and #own == 0 then
    return false
  end
  local slots = {default = tonumber(default), limits = {}, held = {}}
  for i = 1, #own, 2 do
    slots.limits[own[i]] = tonumber(own[i + 1])
  end
  for _, id in ipairs(redis.call('ZRANGE', LEASED, 0, -1)) do
    local group = redis.call('HGET', job_key(id), 'group_key')
    if group then
      slots.held[group] = (slots.held[group] or 0) + 1
    end
  end
  return slots
end

-- Takes a slot of `group` (false: a job in no group, which always gets
-- one) if one is left, and says whether it did.
local function take_slot(slots, group)
  if not group then
    return true
  end
  local limit = slots.limits[group] or slots.default
  if not limit then
    return true
  end
  local held = slots.held[group] or 0
  if held >= limit then
    return false
  end
  slots.held[group] = held + 1
  return true
end

-- Up to `n` pending jobs of READY with scores from `min` to `max`, as
-- {member, score, ...} in rank order: with `slots` (see group_slots), only
-- jobs whose group has a slot left, taking one each (a job of a full
-- group is passed over and the walk goes on, a page at a time, so a full
-- group never stalls the others; its cost is the pending jobs of full
-- groups ranked before the ones taken).
local function walk(min, max, n, slots)
  if not slots then
    return redis.call('ZRANGE', READY, min, max, 'BYSCORE', 'LIMIT', 0, n, 'WITHSCORES')
  end
  local out = {}
  local start, page = 0, math.max(n, 64)
  while #out < 2 * n do
    local batch = redis.call('ZRANGE', READY, min, max, 'BYSCORE', 'LIMIT', start, page,
      'WITHSCORES')
    for i = 1, #batch, 2 do
      local group = redis.call('HGET', job_key(id_of_ready(batch[i])), 'group_key')
      if take_slot(slots, group) then
        out[#out + 1] = batch[i]
        out[#out + 1] = batch[i + 1]
        if #out >= 2 * n then
          break
        end
      end
    end
    if #batch < 2 * page then
      break
    end
    start = start + page
    page = page * 4
  end
  return out
end

-- The queue's priority aging period in microseconds (P:config's
-- priority_aging_ms), or false.
local function aging_period()
  local ms = redis.call('HGET', CONFIG, 'priority_aging_ms')
  if not ms then
    return false
  end
  return tonumber(ms) * 1000
end

-- The effective priority at `now` of the READY entry (`member`, `score`)
-- on a queue aging by `period` (false: none): its priority plus the whole
-- periods it has waited since its available_at, at most 2147483647
-- (queue_core::backend::aged_priority).
local function effective(member, score, now, period)
  local priority = 0 - tonumber(score)
  if not period then
    return priority
  end
  local waited = math.max(0, now - tonumber(string.sub(member, 1, 19)))
  return math.min(priority + math.floor(waited / period), 2147483647)
end

-- Whether candidate `a` ({member, eff}) comes before `b` in the claim
-- order: higher effective priority, then earlier available_at, then lower
-- id (the member's two padded numbers, compared as text).
local function before(a, b)
  if a.eff ~= b.eff then
    return a.eff > b.eff
  end
  return a.member < b.member
end

-- A copy of `slots` (false stays false): each level of an aging pick
-- walks with its own, and the merge takes the real ones.
local function copy_slots(slots)
  if not slots then
    return false
  end
  local held = {}
  for group, count in pairs(slots.held) do
    held[group] = count
  end
  return {default = slots.default, limits = slots.limits, held = held}
end

-- The best `n` pending jobs of READY at `now` as {member, score,
-- effective priority, ...}, best first, with `slots` as `walk` takes
-- them. On an aging queue the best `n` are among each priority level's
-- first `n` (within a level the rank order is also the order by
-- effective priority): each level of LEVELS is walked on its own, and
-- the union is sorted by the effective priority and taken in that order,
-- so the cost is `n` per level present, not the backlog.
local function pick_ready(n, slots, now)
  local period = aging_period()
  local found = {}
  if not period then
    local got = walk('-inf', '+inf', n, slots)
    for i = 1, #got, 2 do
      found[#found + 1] = {member = got[i], score = got[i + 1]}
    end
  else
    for _, level in ipairs(redis.call('ZRANGE', LEVELS, 0, -1)) do
      local got = walk(level, level, n, copy_slots(slots))
      for i = 1, #got, 2 do
        found[#found + 1] = {member = got[i], score = got[i + 1]}
      end
    end
  end
  for _, c in ipairs(found) do
    c.eff = effective(c.member, c.score, now, period)
  end
  if period then
    table.sort(found, before)
  end
  local out = {}
  for _, c in ipairs(found) do
    if #out >= 3 * n then
      break
    end
    -- A plain walk took the slots already.
    local group = period and slots and
      redis.call('HGET', job_key(id_of_ready(c.member)), 'group_key')
    if not (period and slots) or take_slot(slots, group) then
      out[#out + 1] = c.member
      out[#out + 1] = c.score
      out[#out + 1] = fmt(c.eff)
    end
  end
  return out
end

