-- Prune peek: the `n` oldest history rows of one queue finished before
-- now - older_than, of one status if set.
-- ARGV: now, older_than (micros), status ('' for any), n.
-- Returns {id, finished_at, ...} oldest first.
local now = clock(ARGV[1])
local out = {}
for _, row in ipairs(oldest_history(ARGV[3], now - tonumber(ARGV[2]), tonumber(ARGV[4]))) do
  out[#out + 1] = row[1]
  out[#out + 1] = fmt(row[2])
end
return out
