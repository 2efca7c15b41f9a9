-- Queue config: one queue's paused flag and limits.
-- ARGV: none used. Returns {paused (0/1), field, value, ...}.
local out = redis.call('HGETALL', CONFIG)
table.insert(out, 1, redis.call('EXISTS', PAUSED))
return out
