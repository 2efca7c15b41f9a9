-- Configure: replaces one queue's limits (its paused flag is another key
-- and stays); a rate starts with a full bucket. Publishes the queue's
-- name: lifted or raised limits may make jobs claimable.
-- ARGV: now, channel, queue name, then concurrency, rate, burst, lease_ms,
-- backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter ('' for
-- not set). Returns 1.
local now = clock(ARGV[1])
local names = {'concurrency', 'rate', 'burst', 'lease_ms', 'backoff_base_ms', 'backoff_min_ms',
  'backoff_max_ms', 'backoff_jitter'}
redis.call('DEL', CONFIG)
local set = {}
for i, name in ipairs(names) do
  local value = ARGV[i + 3]
  if value ~= '' then
    set[#set + 1] = name
    set[#set + 1] = value
  end
end
if ARGV[5] ~= '' then
  set[#set + 1] = 'tokens'
  set[#set + 1] = ARGV[6]
  set[#set + 1] = 'refilled_at'
  set[#set + 1] = fmt(now)
end
if #set > 0 then
  redis.call('HSET', CONFIG, unpack(set))
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
