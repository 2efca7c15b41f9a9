-- Record samples (global slot; prefixed by clock.lua, not by common.lua):
-- per minute a hash `{ns}:sample:<minute>` (fields `l<bucket, 3
-- digits><queue>`: jobs, added to; `d<queue>`: 'pending scheduled
-- running', replaced), and the sorted set `{ns}:sample_minutes` of the
-- minutes held (by microseconds). Then forgets the minutes before now
-- minus the retention. KEYS[1]: the namespace's global prefix
-- `{<namespace>}`. ARGV: now ('' for the server's TIME), retention in
-- microseconds, the number of lag rows, then per lag row: minute
-- (microseconds), queue, bucket, jobs; then per depth row: minute, queue,
-- pending, scheduled, running. Every row was checked by the caller.
local G = KEYS[1]
local MINUTES = G .. ':sample_minutes'
local now = clock(ARGV[1])
local function minute_key(minute)
  redis.call('ZADD', MINUTES, minute, minute)
  return G .. ':sample:' .. minute
end
local lags = tonumber(ARGV[3])
local i = 4
for _ = 1, lags do
  local field = 'l' .. string.format('%03d', tonumber(ARGV[i + 2])) .. ARGV[i + 1]
  redis.call('HINCRBY', minute_key(ARGV[i]), field, ARGV[i + 3])
  i = i + 4
end
while i <= #ARGV do
  local depth = ARGV[i + 2] .. ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4]
  redis.call('HSET', minute_key(ARGV[i]), 'd' .. ARGV[i + 1], depth)
  i = i + 5
end
local cutoff = '(' .. string.format('%.0f', now - tonumber(ARGV[2]))
for _, minute in ipairs(redis.call('ZRANGEBYSCORE', MINUTES, '-inf', cutoff)) do
  redis.call('UNLINK', G .. ':sample:' .. minute)
end
redis.call('ZREMRANGEBYSCORE', MINUTES, '-inf', cutoff)
return 1
