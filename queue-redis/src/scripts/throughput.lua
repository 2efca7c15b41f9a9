-- Throughput: completed and dead-lettered jobs of one queue per minute,
-- finished in (now - window, now].
-- ARGV: now, window in microseconds.
-- Returns {minute (microseconds), completed, failed, ...} by minute.
local now = clock(ARGV[1])
local since = now - tonumber(ARGV[2])
local counts, minutes = {}, {}
for column, status in ipairs({'completed', 'dead_letter'}) do
  local found = redis.call('ZRANGEBYSCORE', HIST_FIN .. ':' .. status, '(' .. fmt(since),
    fmt(now), 'WITHSCORES')
  for i = 2, #found, 2 do
    local minute = math.floor(tonumber(found[i]) / 60000000) * 60000000
    local c = counts[minute]
    if not c then
      c = {0, 0}
      counts[minute] = c
      minutes[#minutes + 1] = minute
    end
    c[column] = c[column] + 1
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
