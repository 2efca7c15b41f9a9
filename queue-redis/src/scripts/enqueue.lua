-- Enqueue: adds jobs to one queue in input order; a unique key already
-- live returns its job's id. Publishes the queue's name once when a job
-- was added.
-- ARGV: now, channel, queue name, then per job: id, priority, unique key
-- ('' for none), max attempts, schedule kind (now | after | at), schedule
-- value (micros: a delay or an instant), payload.
-- Returns {id, existed (0/1), ...} per job.
local now = clock(ARGV[1])
local out = {}
local added = false
local i = 4
while i <= #ARGV do
  local id, priority, key, max_attempts = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local kind, value, payload = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  i = i + 7
  local existing = false
  if key ~= '' then
    existing = redis.call('HGET', UNIQUE, key)
  end
  if existing then
    out[#out + 1] = existing
    out[#out + 1] = 1
  else
    local at
    if kind == 'now' then
      at = fmt(now)
    elseif kind == 'after' then
      at = fmt(now + tonumber(value))
    else
      at = value
    end
    local k = job_key(id)
    redis.call('HSET', k, 'priority', priority, 'payload', payload, 'attempts', '0',
      'max_attempts', max_attempts, 'available_at', at, 'created_at', fmt(now),
      'updated_at', fmt(now))
    if key ~= '' then
      redis.call('HSET', k, 'unique_key', key)
      redis.call('HSET', UNIQUE, key, id)
    end
    place(id, priority, at, now)
    added = true
    out[#out + 1] = id
    out[#out + 1] = 0
  end
end
if added then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return out
