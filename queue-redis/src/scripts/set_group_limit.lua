-- Set group limit: gives one group of a configured (or paused) queue its
-- own limit, or removes it; publishes the queue's name (a raised or
-- lifted limit may make jobs claimable).
-- ARGV: now (unused), channel, queue name, group key, limit ('' removes).
-- Returns 1, or 0 when the queue was never configured nor paused (no
-- config hash; a paused flag alone is a queue paused before the hash
-- was marked): nothing is written.
if redis.call('EXISTS', CONFIG) == 0 and redis.call('EXISTS', PAUSED) == 0 then
  return 0
end
if ARGV[5] == '' then
  redis.call('HDEL', GROUP_LIMITS, ARGV[4])
else
  redis.call('HSET', GROUP_LIMITS, ARGV[4], ARGV[5])
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
