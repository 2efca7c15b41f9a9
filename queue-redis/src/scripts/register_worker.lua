-- Register a worker (global slot; not prefixed by common.lua): insert or
-- replace its registration and set its last_seen to now (its heartbeat).
-- KEYS[1]: the namespace's global prefix `{<namespace>}`.
-- ARGV: now ('' for the server's TIME), worker id, its registration as JSON.
local G = KEYS[1]
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
redis.call('HSET', G .. ':workers', ARGV[2], ARGV[3])
redis.call('ZADD', G .. ':worker_seen', string.format('%.0f', now), ARGV[2])
return 1
