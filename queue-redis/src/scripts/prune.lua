-- Prune: deletes the `n` oldest history rows of one queue finished before
-- now - older_than, of one status if set.
-- ARGV: now, older_than (micros), status ('' for any), n. Returns the count.
local now = clock(ARGV[1])
local index = HIST_FIN
if ARGV[3] ~= '' then
  index = HIST_FIN .. ':' .. ARGV[3]
end
local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. fmt(now - tonumber(ARGV[2])),
  'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(old) do
  local status = redis.call('HGET', hist_key(id), 'status')
  if status then
    forget(id, status)
  else
    redis.call('ZREM', index, id)
  end
end
return #old
