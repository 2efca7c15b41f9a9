-- Ack: archives each job whose lease is current as completed.
-- ARGV: now, then per ack: id, worker, attempt, has result (0/1), result.
-- Returns {1 acked | 0 lease lost, ...}. Their dependants learn of it (settle).
local now = clock(ARGV[1])
local out = {}
local sink = new_sink()
local i = 2
while i <= #ARGV do
  local id, worker, attempt = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local result = false
  if ARGV[i + 3] == '1' then
    result = ARGV[i + 4]
  end
  i = i + 5
  local row = held_row(id, worker, attempt)
  if row then
    archive(id, 'completed', result, false, worker, now, true, sink, row)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
flush(sink)
settle(now)
return out
