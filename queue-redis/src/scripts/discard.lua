-- Discard: archives a live job, in any state, as discarded.
-- ARGV: now, id. Returns 1 discarded, 0 not live.
local now = clock(ARGV[1])
if archive(ARGV[2], 'discarded', false, false, false, now, false) then
  return 1
end
return 0
