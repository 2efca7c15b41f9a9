-- Reclaim peek: the `n` oldest expired leases of one queue.
-- ARGV: now, n. Returns {id, lease_until, ...} oldest first.
local now = clock(ARGV[1])
return redis.call('ZRANGEBYSCORE', LEASED, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[2]))
