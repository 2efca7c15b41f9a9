-- Discard or cancel: archives live jobs, in any state, as `status`
-- (discarded or cancelled), and publishes each one's id on the cancel
-- channel so that a worker running it stops; then their dependants learn
-- of it, in ascending id order (settle). KEYS: the prefixes of the
-- queues of the jobs (several on standalone Redis only).
-- ARGV: now, status, cancel channel, then per job: the position of its
-- queue in KEYS, its id. Returns how many were archived (the others were
-- not live).
local now = clock(ARGV[1])
local status, channel = ARGV[2], ARGV[3]
local archived = 0
for i = 4, #ARGV, 2 do
  use_queue(KEYS[tonumber(ARGV[i])])
  local id = ARGV[i + 1]
  if archive(id, status, false, false, false, now, false) then
    redis.call('PUBLISH', channel, id)
    archived = archived + 1
  end
end
settle(now)
return archived
