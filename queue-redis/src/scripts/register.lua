-- Register (global slot; not prefixed by common.lua): gives each queue
-- name a small index, once, and reserves `n` job sequence numbers.
-- KEYS[1]: the namespace's global prefix `{<namespace>}`.
-- ARGV: the most queues allowed, n, then queue names. Returns {last sequence number, index, ...}.
local G = KEYS[1]
local MAX_QUEUES = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local last = 0
if n > 0 then
  last = redis.call('INCRBY', G .. ':job_seq', n)
else
  last = tonumber(redis.call('GET', G .. ':job_seq') or '0')
end
local out = {last}
for i = 3, #ARGV do
  local name = ARGV[i]
  local index = redis.call('HGET', G .. ':queues', name)
  if not index then
    local next_index = redis.call('INCR', G .. ':queue_seq')
    if next_index > MAX_QUEUES then
      redis.call('DECR', G .. ':queue_seq')
      return redis.error_reply('QUEUELIMIT at most ' .. MAX_QUEUES .. ' queues per namespace')
    end
    index = tostring(next_index)
    redis.call('HSET', G .. ':queues', name, index)
    redis.call('HSET', G .. ':queue_names', index, name)
  end
  out[#out + 1] = tonumber(index)
end
return out
