-- Stats: one queue's counts by derived state at now.
-- ARGV: now. Returns {now, paused, pending, scheduled, running, stalled,
-- oldest pending available_at or '', waiting}. Waiting jobs sit in
-- DELAYED at WAITING_AT, after every scheduled one.
local now = clock(ARGV[1])
local n = fmt(now)
local due = redis.call('ZCOUNT', DELAYED, '-inf', n)
local pending = redis.call('ZCARD', READY) + due
local scheduled = redis.call('ZCOUNT', DELAYED, '(' .. n, '(' .. WAITING_AT)
local waiting = redis.call('ZCOUNT', DELAYED, WAITING_AT, '+inf')
local running = redis.call('ZCOUNT', LEASED, '(' .. n, '+inf')
local stalled = redis.call('ZCOUNT', LEASED, '-inf', n)
-- LEVELS holds each priority level's oldest pending available_at.
local oldest = false
local first = redis.call('ZRANGE', LEVELS, 0, 0, 'WITHSCORES')
if first[1] then
  oldest = fmt(tonumber(first[2]))
end
if due > 0 then
  local d = redis.call('ZRANGE', DELAYED, 0, 0)
  local at = redis.call('HGET', job_key(d[1]), 'available_at')
  if at and (not oldest or tonumber(at) < tonumber(oldest)) then
    oldest = at
  end
end
return {n, redis.call('EXISTS', PAUSED), pending, scheduled, running, stalled, oldest or '',
  waiting}
