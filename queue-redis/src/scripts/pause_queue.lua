-- Pause or resume one queue; a resume publishes the queue's name. A
-- pause marks the queue configured (the `configured` field of its
-- config hash, which a resume keeps): it may be given group limits, as a
-- paused queue's config row elsewhere.
-- ARGV: now (unused), paused (1/0), channel, queue name.
if ARGV[2] == '1' then
  redis.call('SET', PAUSED, '1')
  redis.call('HSET', CONFIG, 'configured', '1')
else
  if redis.call('DEL', PAUSED) == 1 then
    redis.call('PUBLISH', ARGV[3], ARGV[4])
  end
end
return 1
