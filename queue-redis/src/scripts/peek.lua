-- Peek: the best `n` pending jobs of one queue without claiming them
-- (after promoting scheduled jobs that came due); nothing while paused.
-- A dequeue over several queues peeks each, picks the best overall, then
-- claims the chosen count from each queue.
-- ARGV: now, n. Returns {member, score, ...} best first.
local now = clock(ARGV[1])
if redis.call('EXISTS', PAUSED) == 1 then
  return {}
end
promote(now)
return redis.call('ZRANGE', READY, 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
