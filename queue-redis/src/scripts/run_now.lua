-- Run now: makes the given jobs of one queue that are scheduled at now
-- (unleased, available_at later than now, not waiting for dependencies)
-- pending now; others are left.
-- ARGV: now, channel, queue name, padded ids... Returns how many moved.
local now = clock(ARGV[1])
local at = fmt(now)
local moved = 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', job_key(id), 'priority', 'available_at', 'lease_until')
  if f[2] and not f[3] and tonumber(f[2]) > now and not is_waiting(f[2]) then
    redis.call('ZREM', DELAYED, id)
    redis.call('ZREM', IDS_DELAYED, id)
    redis.call('HSET', job_key(id), 'available_at', at, 'updated_at', at)
    to_ready(id, f[1], at)
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return moved
