-- Dequeue: claims the best `n` pending jobs of one queue (nothing while
-- it is paused, no more than its limits allow, taking a token per job
-- from its bucket), after promoting scheduled jobs that came due; with a
-- bound, only jobs ranked no worse than it (a dequeue over several queues
-- chose them by peeking: a job worse than the chosen ones is not taken in
-- their place when another dequeuer took those first; on an aging queue
-- worse by effective priority at this claim's now; on a fair queue, its
-- jobs in its fair order up to the first one worse than the bound).
-- ARGV: now, n, lease (micros), worker id, bound score ('' for none),
-- bound member. Returns {} when it claimed nothing, else {{now,
-- lease_until}, job, ...} with the jobs best first (a fair queue's in its
-- fair order), each as the fields
-- of its row that the caller does not know (it knows the worker, and the
-- header gives updated_at and lease_until), by position: {id, priority,
-- unique_key, payload, attempts, max_attempts, snoozes, available_at,
-- first_locked_at, last_error, created_at, trace_context, group_key,
-- effective priority}, '' for an absent unique_key, last_error,
-- trace_context or group_key. A job
-- whose group is at its limit is passed over (`pick_ready`). Positions rather than
-- HGETALL's names and values: half the strings to convert, here and in
-- the caller.
local now = clock(ARGV[1])
if redis.call('EXISTS', PAUSED) == 1 then
  return {}
end
promote(now)
local n = tonumber(ARGV[2])
local allowed, bucket = allowance(now)
if allowed and allowed < n then
  n = allowed
end
if n <= 0 then
  return {}
end
local until_at = fmt(now + tonumber(ARGV[3]))
local worker = ARGV[4]
local fair = is_fair()
local picked, stored
if fair then
  picked, stored = pick_fair(n, group_slots(), now)
else
  picked = pick_ready(n, group_slots(), now)
end
local bound = false
if ARGV[5] ~= '' then
  bound = {member = ARGV[6], eff = effective(ARGV[6], ARGV[5], now, aging_period())}
end
local now_text = fmt(now)
local out = {{now_text, until_at}}
local members, taken, ids, leased, levels, groups = {}, {}, {}, {}, {}, {}
for i = 1, #picked, 3 do
  local member, eff = picked[i], tonumber(picked[i + 2])
  if bound and before(bound, {member = member, eff = eff}) then
    break
  end
  local id = id_of_ready(member)
  local k = job_key(id)
  members[#members + 1] = member
  taken[#taken + 1] = id
  ids[#ids + 1] = 0
  ids[#ids + 1] = id
  levels[picked[i + 1]] = true
  leased[#leased + 1] = until_at
  leased[#leased + 1] = id
  local f = redis.call('HMGET', k, 'priority', 'unique_key', 'payload', 'attempts',
    'max_attempts', 'snoozes', 'available_at', 'first_locked_at', 'last_error', 'created_at',
    'trace_context', 'group_key')
  local attempts = fmt(tonumber(f[4]) + 1)
  -- Set on the first claim; later ones write back the same value.
  local first = f[8] or now_text
  redis.call('HSET', k, 'attempts', attempts, 'lease_until', until_at, 'locked_by', worker,
    'updated_at', now_text, 'first_locked_at', first)
  out[#out + 1] = {id, f[1], f[2] or '', f[3], attempts, f[5], f[6] or '0', f[7], first,
    f[9] or '', f[10], f[11] or '', f[12] or '', picked[i + 2]}
  if fair then
    fair_remove(f[12], member)
    groups[#groups + 1] = f[12] or ''
  end
end
if #out == 1 then
  return {}
end
bulk('ZREM', READY, members)
-- Each level taken from once (keyed by the score as read, named here).
for score in pairs(levels) do
  level_refresh(level_name(score))
end
bulk('ZADD', LEASED, leased)
-- The id indexes follow: one command each for the whole claim.
bulk('ZREM', IDS_READY, taken)
bulk('ZADD', IDS_LEASED, ids)
take_tokens(bucket, #out - 1)
advance_turns(groups, stored)
return out
