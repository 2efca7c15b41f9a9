-- Dequeue: claims the best `n` pending jobs of one queue (nothing while
-- it is paused), after promoting scheduled jobs that came due.
-- ARGV: now, n, lease (micros), worker id.
-- Returns {{id, field, value, ...}, ...} best first.
local now = clock(ARGV[1])
if redis.call('EXISTS', PAUSED) == 1 then
  return {}
end
promote(now)
local n = tonumber(ARGV[2])
local until_at = fmt(now + tonumber(ARGV[3]))
local worker = ARGV[4]
local picked = redis.call('ZRANGE', READY, 0, n - 1)
local out = {}
for _, member in ipairs(picked) do
  local id = id_of_ready(member)
  local k = job_key(id)
  redis.call('ZREM', READY, member)
  redis.call('ZREM', READY_AT, id)
  redis.call('HINCRBY', k, 'attempts', 1)
  redis.call('HSET', k, 'lease_until', until_at, 'locked_by', worker, 'updated_at', fmt(now))
  redis.call('HSETNX', k, 'first_locked_at', fmt(now))
  redis.call('ZADD', LEASED, until_at, id)
  out[#out + 1] = read_job(id)
end
return out
