-- Prune peek: the `n` oldest history rows of one queue finished before
-- now - older_than, of one status if set.
-- ARGV: now, older_than (micros), status ('' for any), n.
-- Returns {id, finished_at, ...} oldest first.
local now = clock(ARGV[1])
local index = HIST_FIN
if ARGV[3] ~= '' then
  index = HIST_FIN .. ':' .. ARGV[3]
end
return redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. fmt(now - tonumber(ARGV[2])),
  'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[4]))
