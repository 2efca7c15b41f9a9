-- Configure: replaces one queue's limits (its paused flag is another key
-- and stays); a rate starts with a full bucket. Publishes the queue's
-- name: lifted or raised limits may make jobs claimable.
-- ARGV: now, channel, queue name, then concurrency, rate, burst, lease_ms,
-- backoff_base_ms, backoff_min_ms, backoff_max_ms, backoff_jitter,
-- group_concurrency, priority_aging_ms, fair_groups ('' for not set). Returns 1.
-- Making a queue fair files its pending jobs per group here (one HGET a
-- job); lifting it drops those files. The hash keeps the field
-- `configured` whatever is set: a configured queue may be given group
-- limits (set_group_limit.lua), as a queue with a config row elsewhere.
local now = clock(ARGV[1])
local names = {'concurrency', 'rate', 'burst', 'lease_ms', 'backoff_base_ms', 'backoff_min_ms',
  'backoff_max_ms', 'backoff_jitter', 'group_concurrency', 'priority_aging_ms', 'fair_groups'}
local was_fair = is_fair()
local fair = ARGV[14] ~= ''
if fair and not was_fair then
  fair_build()
elseif was_fair and not fair then
  fair_drop()
end
redis.call('DEL', CONFIG)
local set = {'configured', '1'}
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
redis.call('HSET', CONFIG, unpack(set))
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
