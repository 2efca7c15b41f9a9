-- Next due: the earliest available_at later than now among the queue's
-- scheduled jobs (paused or not); waiting jobs (at WAITING_AT) are due at
-- no time.
-- ARGV: now. Returns {now, available_at or ''}.
local now = clock(ARGV[1])
local first = redis.call('ZRANGEBYSCORE', DELAYED, '(' .. fmt(now), '(' .. WAITING_AT, 'LIMIT',
  0, 1)
local at = ''
if first[1] then
  at = redis.call('HGET', job_key(first[1]), 'available_at') or ''
end
return {fmt(now), at}
