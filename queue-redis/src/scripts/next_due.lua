-- Next due: the earliest available_at later than now among the queue's
-- scheduled jobs (paused or not).
-- ARGV: now. Returns {now, available_at or ''}.
local now = clock(ARGV[1])
local first = redis.call('ZRANGEBYSCORE', DELAYED, '(' .. fmt(now), '+inf', 'LIMIT', 0, 1)
local at = ''
if first[1] then
  at = redis.call('HGET', job_key(first[1]), 'available_at') or ''
end
return {fmt(now), at}
