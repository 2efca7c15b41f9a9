-- Prune: deletes the `n` oldest history rows of one queue finished before
-- now - older_than, of one status if set, and the list of each one's
-- dependants (workflow.lua), which a job no longer known has no use for.
-- ARGV: now, older_than (micros), status ('' for any), n. Returns the count.
local now = clock(ARGV[1])
local old = oldest_history(ARGV[3], now - tonumber(ARGV[2]), tonumber(ARGV[4]))
for _, row in ipairs(old) do
  local id = row[1]
  redis.call('DEL', P .. ':dependants:' .. id)
  local status = redis.call('HGET', hist_key(id), 'status')
  if status then
    forget(id, status)
  else
    for _, s in ipairs(STATUSES) do
      redis.call('ZREM', HIST_IDS .. ':' .. s, id)
      redis.call('ZREM', HIST_FIN .. ':' .. s, id)
    end
  end
end
return #old
