-- Upgrade from key layout 1: drops the pending-by-available_at index
-- (P:ready_at) and builds LEVELS from READY: the first member of each
-- priority level is its oldest job (members start with the padded
-- available_at), one range query per level. Idempotent.
redis.call('DEL', P .. ':ready_at')
redis.call('DEL', LEVELS)
local level = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
while level[1] do
  redis.call('ZADD', LEVELS, tonumber(string.sub(level[1], 1, 19)), level_name(level[2]))
  level = redis.call('ZRANGE', READY, '(' .. level[2], '+inf', 'BYSCORE', 'LIMIT', 0, 1,
    'WITHSCORES')
end
return redis.call('ZCARD', LEVELS)
