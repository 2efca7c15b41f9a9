-- Record samples (global slot; prefixed by clock.lua, not by common.lua):
-- per minute a hash `{ns}:sample:<minute>` (fields `l<queue>`: the lag
-- histogram, 'bucket:jobs ...' by bucket, added to; `d<queue>`: 'pending
-- scheduled running', replaced), and the sorted set `{ns}:sample_minutes`
-- of the minutes held (by microseconds). Then forgets the minutes before
-- now minus the retention. One field per queue and minute keeps a day's
-- read to two fields a queue-minute, however many buckets its lags fill.
-- KEYS[1]: the namespace's global prefix `{<namespace>}`. ARGV: now (''
-- for the server's TIME), retention in microseconds, the number of lag
-- rows, then per lag row: minute (microseconds), queue, histogram; then
-- per depth row: minute, queue, pending, scheduled, running. Every row
-- was checked by the caller.
local G = KEYS[1]
local MINUTES = G .. ':sample_minutes'
local now = clock(ARGV[1])
local function minute_key(minute)
  redis.call('ZADD', MINUTES, minute, minute)
  return G .. ':sample:' .. minute
end
-- 'bucket:jobs ...' into `into` (bucket -> jobs), added to.
local function add(into, histogram)
  for bucket, jobs in string.gmatch(histogram, '(%d+):(%d+)') do
    local b = tonumber(bucket)
    into[b] = (into[b] or 0) + tonumber(jobs)
  end
end
local lags = tonumber(ARGV[3])
local i = 4
for _ = 1, lags do
  local key, field = minute_key(ARGV[i]), 'l' .. ARGV[i + 1]
  local held = redis.call('HGET', key, field)
  local histogram = ARGV[i + 2]
  if held then
    local sum = {}
    add(sum, held)
    add(sum, histogram)
    local buckets = {}
    for b in pairs(sum) do
      buckets[#buckets + 1] = b
    end
    table.sort(buckets)
    local parts = {}
    for j, b in ipairs(buckets) do
      parts[j] = b .. ':' .. string.format('%.0f', sum[b])
    end
    histogram = table.concat(parts, ' ')
  end
  redis.call('HSET', key, field, histogram)
  i = i + 3
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
