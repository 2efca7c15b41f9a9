-- Register a worker (global slot; prefixed by clock.lua, not common.lua):
-- insert or replace its registration and set its last_seen to now (its
-- heartbeat). KEYS[1]: the namespace's global prefix `{<namespace>}`.
-- ARGV: now ('' for the server's TIME), worker id, its registration as
-- JSON.
local G = KEYS[1]
local now = clock(ARGV[1])
redis.call('HSET', G .. ':workers', ARGV[2], ARGV[3])
redis.call('ZADD', G .. ':worker_seen', string.format('%.0f', now), ARGV[2])
return 1
