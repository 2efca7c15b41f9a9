-- Deregister a worker (global slot; not prefixed by common.lua).
-- KEYS[1]: the namespace's global prefix `{<namespace>}`.
-- ARGV: worker id. Returns 1 when it was registered, else 0.
local G = KEYS[1]
redis.call('ZREM', G .. ':worker_seen', ARGV[1])
return redis.call('HDEL', G .. ':workers', ARGV[1])
