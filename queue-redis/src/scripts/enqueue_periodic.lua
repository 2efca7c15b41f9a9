-- Periodic fire (runs before enqueue.lua's body, in the same script):
-- records fire `fire_at` of `schedule` unless a fire at or after it is
-- recorded, and then lets the enqueue below add its job; otherwise
-- returns false (a nil reply) and writes nothing.
-- ARGV: now, channel, queue name, schedule, fire_at, next_fire_at (micros,
-- '' for none), then one job as enqueue.lua reads it. The three schedule
-- arguments are taken out of ARGV before the enqueue reads its job.
local schedule, fire_at, next_at = ARGV[4], ARGV[5], ARGV[6]
for _ = 1, 3 do
  table.remove(ARGV, 4)
end
local last = redis.call('HGET', SCHEDULES, schedule)
if last then
  local last_at = string.sub(last, 1, string.find(last, ':', 1, true) - 1)
  -- Padded text compares as the integers do, without float rounding.
  if pad(last_at) >= pad(fire_at) then
    return false
  end
end
redis.call('HSET', SCHEDULES, schedule, fire_at .. ':' .. next_at)
