-- Snooze: gives the current lease back without counting the attempt,
-- one more snooze, due again at now + delay.
-- ARGV: now, id, worker, attempt, delay (micros). Returns the new
-- available_at, or '' when the lease is lost.
local now = clock(ARGV[1])
local id, worker, attempt = ARGV[2], ARGV[3], ARGV[4]
if not holds(id, worker, attempt) then
  return ''
end
local k = job_key(id)
local at = fmt(now + tonumber(ARGV[5]))
clear_lease(id)
redis.call('HINCRBY', k, 'attempts', -1)
redis.call('HINCRBY', k, 'snoozes', 1)
redis.call('HSET', k, 'available_at', at, 'updated_at', fmt(now))
place(id, redis.call('HGET', k, 'priority'), at, now)
return at
