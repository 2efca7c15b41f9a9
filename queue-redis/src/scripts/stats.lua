-- Stats: one queue's counts by derived state at now.
-- ARGV: now. Returns {now, paused, pending, scheduled, running, stalled,
-- oldest pending available_at or ''}.
local now = clock(ARGV[1])
local n = fmt(now)
local due = redis.call('ZCOUNT', DELAYED, '-inf', n)
local pending = redis.call('ZCARD', READY) + due
local scheduled = redis.call('ZCOUNT', DELAYED, '(' .. n, '+inf')
local running = redis.call('ZCOUNT', LEASED, '(' .. n, '+inf')
local stalled = redis.call('ZCOUNT', LEASED, '-inf', n)
-- The oldest pending job of each priority level is that level's first
-- member (members start with the padded available_at): one range query
-- per level present, so this costs more with many distinct priorities
-- waiting, and nothing per job.
local oldest = false
local level = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
while level[1] do
  local at = string.sub(level[1], 1, 19)
  if not oldest or at < oldest then
    oldest = at
  end
  level = redis.call('ZRANGE', READY, '(' .. level[2], '+inf', 'BYSCORE', 'LIMIT', 0, 1,
    'WITHSCORES')
end
if oldest then
  oldest = fmt(tonumber(oldest))
end
if due > 0 then
  local d = redis.call('ZRANGE', DELAYED, 0, 0)
  local at = redis.call('HGET', job_key(d[1]), 'available_at')
  if at and (not oldest or tonumber(at) < tonumber(oldest)) then
    oldest = at
  end
end
return {n, redis.call('EXISTS', PAUSED), pending, scheduled, running, stalled, oldest or ''}
