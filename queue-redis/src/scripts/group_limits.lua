-- Group limits: every group of one queue with its own limit.
-- ARGV: none used. Returns {group key, limit, ...}.
return redis.call('HGETALL', GROUP_LIMITS)
