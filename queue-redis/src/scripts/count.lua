-- Count: one queue's live jobs and completed history rows whose priority
-- is at least `min`. Walks every job of the queue: for tests and
-- benchmarks, not for a busy production queue.
-- ARGV: now (unused), min priority. Returns {live, completed}.
local min = tonumber(ARGV[2])
local live = redis.call('ZCOUNT', READY, '-inf', fmt(-min))
for _, index in ipairs({DELAYED, LEASED}) do
  for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    if tonumber(redis.call('HGET', job_key(id), 'priority') or min - 1) >= min then
      live = live + 1
    end
  end
end
local completed = 0
for _, id in ipairs(redis.call('ZRANGE', HIST_IDS .. ':completed', 0, -1)) do
  if tonumber(redis.call('HGET', hist_key(id), 'priority') or min - 1) >= min then
    completed = completed + 1
  end
end
return {live, completed}
