-- Throughput: completed and dead-lettered jobs of one queue per minute,
-- finished in (now - window, now]. Counted with ZCOUNT a minute at a
-- time, jumping from one minute that holds rows to the next: two
-- lookups per such minute, however many rows it holds.
-- ARGV: now, window in microseconds.
-- Returns {minute (microseconds), completed, failed, ...} by minute.
local now = clock(ARGV[1])
local since = now - tonumber(ARGV[2])
local MINUTE = 60000000
local counts, minutes = {}, {}
for column, status in ipairs({'completed', 'dead_letter'}) do
  local set = HIST_FIN .. ':' .. status
  local from = '(' .. fmt(since)
  while true do
    local first = redis.call('ZRANGEBYSCORE', set, from, fmt(now), 'WITHSCORES', 'LIMIT', 0, 1)
    if not first[1] then
      break
    end
    local minute = math.floor(tonumber(first[2]) / MINUTE) * MINUTE
    local next_minute = minute + MINUTE
    local to = fmt(now)
    if next_minute <= now then
      to = '(' .. fmt(next_minute)
    end
    local c = counts[minute]
    if not c then
      c = {0, 0}
      counts[minute] = c
      minutes[#minutes + 1] = minute
    end
    c[column] = c[column] + redis.call('ZCOUNT', set, from, to)
    if next_minute > now then
      break
    end
    from = fmt(next_minute)
  end
end
table.sort(minutes)
local out = {}
for _, minute in ipairs(minutes) do
  out[#out + 1] = fmt(minute)
  out[#out + 1] = counts[minute][1]
  out[#out + 1] = counts[minute][2]
end
return out
