-- Set group weight: gives one group of a configured (or paused) queue its
-- own weight in fair claims (WEIGHTS, in fair.lua), or removes it. No
-- wake-up: a weight changes the order of claims, not what is claimable.
-- ARGV: now (unused), group key, weight ('' removes). Returns 1, or 0
-- when the queue was never configured nor paused (as set_group_limit.lua):
-- nothing is written.
if redis.call('EXISTS', CONFIG) == 0 and redis.call('EXISTS', PAUSED) == 0 then
  return 0
end
if ARGV[3] == '' then
  redis.call('HDEL', WEIGHTS, ARGV[2])
else
  redis.call('HSET', WEIGHTS, ARGV[2], ARGV[3])
end
return 1
