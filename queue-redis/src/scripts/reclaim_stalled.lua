-- Reclaim: the `n` oldest expired leases of each queue go back to pending
-- (attempts left) or to the dead letters (none left), their last error
-- naming the lost lease; then the dependants of those dead-lettered learn
-- of it, in ascending id order (settle). KEYS: the queues' prefixes
-- (several on standalone Redis only).
-- ARGV: now, then `n` per key. Returns {requeued, dead-lettered}.
local now = clock(ARGV[1])
local requeued, dead = 0, 0
for q = 1, #KEYS do
  use_queue(KEYS[q])
  local stalled = redis.call('ZRANGEBYSCORE', LEASED, '-inf', fmt(now), 'LIMIT', 0,
    tonumber(ARGV[q + 1]))
  for _, id in ipairs(stalled) do
    local k = job_key(id)
    local f = redis.call('HMGET', k, 'locked_by', 'attempts', 'max_attempts', 'priority')
    local expired = cjson.encode({kind = 'lease_expired', worker_id = f[1],
      attempt = tonumber(f[2])})
    if tonumber(f[2]) < tonumber(f[3]) then
      clear_lease(id)
      redis.call('HSET', k, 'available_at', fmt(now), 'updated_at', fmt(now),
        'last_error', expired)
      to_ready(id, f[4], fmt(now))
      requeued = requeued + 1
    else
      archive(id, 'dead_letter', false, expired, false, now, true)
      dead = dead + 1
    end
  end
end
settle(now)
return {requeued, dead}
