-- Nack: records a failed attempt of the current lease: a retry at
-- now + delay while attempts are left and a retry is wanted, else a dead
-- letter (whose dependants learn of it: settle).
-- ARGV: now, id, worker, attempt, error, retry (1/0), delay (micros).
-- Returns {0} lease lost, {1, available_at} retrying, {2} dead-lettered.
local now = clock(ARGV[1])
local id, worker, attempt, err = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not holds(id, worker, attempt) then
  return {0}
end
local k = job_key(id)
local f = redis.call('HMGET', k, 'attempts', 'max_attempts', 'priority')
if ARGV[6] == '1' and tonumber(f[1]) < tonumber(f[2]) then
  local at = fmt(now + tonumber(ARGV[7]))
  clear_lease(id)
  redis.call('HSET', k, 'available_at', at, 'last_error', err, 'updated_at', fmt(now))
  place(id, f[3], at, now)
  return {1, at}
end
archive(id, 'dead_letter', false, err, worker, now, true)
settle(now)
return {2}
