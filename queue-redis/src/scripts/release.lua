-- Release: gives the current lease back without counting the attempt.
-- ARGV: now, id, worker, attempt. Returns 1 released, 0 lease lost.
local now = clock(ARGV[1])
local id, worker, attempt = ARGV[2], ARGV[3], ARGV[4]
if not holds(id, worker, attempt) then
  return 0
end
local k = job_key(id)
clear_lease(id)
redis.call('HINCRBY', k, 'attempts', -1)
redis.call('HSET', k, 'available_at', fmt(now), 'updated_at', fmt(now))
to_ready(id, redis.call('HGET', k, 'priority'), fmt(now))
return 1
