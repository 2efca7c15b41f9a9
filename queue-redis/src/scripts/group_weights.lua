-- Group weights: every group of one queue with its own weight.
-- ARGV: none used. Returns {group key, weight, ...}.
return redis.call('HGETALL', WEIGHTS)
