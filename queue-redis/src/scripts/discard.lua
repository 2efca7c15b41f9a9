-- Discard or cancel: archives a live job, in any state, as `status`
-- (discarded or cancelled), and publishes its id on the cancel channel so
-- that a worker running it stops.
-- ARGV: now, id, status, cancel channel. Returns 1 archived, 0 not live.
local now = clock(ARGV[1])
if archive(ARGV[2], ARGV[3], false, false, false, now, false) then
  redis.call('PUBLISH', ARGV[4], ARGV[2])
  return 1
end
return 0
