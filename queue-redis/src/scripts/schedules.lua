-- Schedules: the fires recorded with one queue's jobs.
-- ARGV: none used. Returns {schedule, last ':' next, ...}.
return redis.call('HGETALL', SCHEDULES)
