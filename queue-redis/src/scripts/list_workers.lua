-- List the workers (global slot; prefixed by clock.lua, not by
-- common.lua): first delete those last seen `forget_after` or more before
-- now, then return the others. KEYS[1]: the namespace's global prefix
-- `{<namespace>}`. ARGV: now ('' for the server's TIME), forget_after in
-- microseconds. Returns {now, id, registration JSON, last_seen, ...}
-- (microseconds).
local G = KEYS[1]
local WORKERS = G .. ':workers'
local SEEN = G .. ':worker_seen'
local now = clock(ARGV[1])
local cutoff = string.format('%.0f', now - tonumber(ARGV[2]))
local forgotten = redis.call('ZRANGEBYSCORE', SEEN, '-inf', cutoff)
for _, id in ipairs(forgotten) do
  redis.call('HDEL', WORKERS, id)
end
redis.call('ZREMRANGEBYSCORE', SEEN, '-inf', cutoff)
local out = {string.format('%.0f', now)}
local seen = redis.call('ZRANGE', SEEN, 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do
  local info = redis.call('HGET', WORKERS, seen[i])
  if info then
    out[#out + 1] = seen[i]
    out[#out + 1] = info
    out[#out + 1] = string.format('%.0f', tonumber(seen[i + 1]))
  end
end
return out
