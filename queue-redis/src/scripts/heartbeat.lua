-- Heartbeat: extends each current, unexpired lease to now + extend.
-- ARGV: now, extend (micros), then per lease: id, worker, attempt.
-- Returns {1 extended | 0 lost, ...}.
local now = clock(ARGV[1])
local until_at = fmt(now + tonumber(ARGV[2]))
local out = {}
local i = 3
while i <= #ARGV do
  local id, worker, attempt = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  local lease = redis.call('HGET', job_key(id), 'lease_until')
  if holds(id, worker, attempt) and tonumber(lease) > now then
    redis.call('HSET', job_key(id), 'lease_until', until_at, 'updated_at', fmt(now))
    redis.call('ZADD', LEASED, until_at, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
