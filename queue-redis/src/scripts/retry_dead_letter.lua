-- Retry: puts a dead letter back into its queue under its id, pending now
-- with attempts 0, unless its unique key is live again.
-- ARGV: now, id, channel, queue name.
-- Returns {1} retried, {0} not a dead letter, {-1, key} key live.
local now = clock(ARGV[1])
local id = ARGV[2]
local h = hist_key(id)
local f = redis.call('HMGET', h, 'status', 'priority', 'unique_key', 'payload',
  'max_attempts', 'last_error', 'created_at', 'snoozes', 'trace_context', 'group_key',
  'depends_on')
if f[1] ~= 'dead_letter' then
  return {0}
end
if f[3] and redis.call('HEXISTS', UNIQUE, f[3]) == 1 then
  return {-1, f[3]}
end
local k = job_key(id)
redis.call('HSET', k, 'priority', f[2], 'payload', f[4], 'attempts', '0',
  'max_attempts', f[5], 'available_at', fmt(now), 'created_at', f[7], 'updated_at', fmt(now))
if f[3] then
  redis.call('HSET', k, 'unique_key', f[3])
  redis.call('HSET', UNIQUE, f[3], id)
end
if f[6] then
  redis.call('HSET', k, 'last_error', f[6])
end
if f[8] then
  redis.call('HSET', k, 'snoozes', f[8])
end
if f[9] then
  redis.call('HSET', k, 'trace_context', f[9])
end
if f[10] then
  redis.call('HSET', k, 'group_key', f[10])
end
-- The dependencies it was enqueued with, for job_links (it waits for none
-- now: it had run).
if f[11] then
  redis.call('HSET', k, 'depends_on', f[11])
end
to_ready(id, f[2], fmt(now))
forget(id, 'dead_letter')
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {1}
