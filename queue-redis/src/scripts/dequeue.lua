-- Dequeue: claims the best `n` pending jobs of one queue (nothing while
-- it is paused, no more than its limits allow, taking a token per job
-- from its bucket), after promoting scheduled jobs that came due; with a
-- bound, only jobs ranked no worse than it (a dequeue over several queues
-- chose them by peeking: a job worse than the chosen ones is not taken in
-- their place when another dequeuer took those first).
-- ARGV: now, n, lease (micros), worker id, bound score ('' for none),
-- bound member. Returns {{id, field, value, ...}, ...} best first.
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
local picked = redis.call('ZRANGE', READY, 0, n - 1, 'WITHSCORES')
local bound_score, bound_member = tonumber(ARGV[5]), ARGV[6]
local out = {}
local members, ids, leased = {}, {}, {}
local now_text = fmt(now)
for i = 1, #picked, 2 do
  local member, score = picked[i], tonumber(picked[i + 1])
  if bound_score and (score > bound_score or (score == bound_score and member > bound_member)) then
    break
  end
  local id = id_of_ready(member)
  local k = job_key(id)
  members[#members + 1] = member
  ids[#ids + 1] = id
  leased[#leased + 1] = until_at
  leased[#leased + 1] = id
  -- Read once, write once, and answer the row as written.
  local fields = redis.call('HGETALL', k)
  local at = {}
  for j = 1, #fields, 2 do
    at[fields[j]] = j + 1
  end
  local changes = {attempts = fmt(tonumber(fields[at.attempts]) + 1), lease_until = until_at,
    locked_by = worker, updated_at = now_text}
  if not at.first_locked_at then
    changes.first_locked_at = now_text
  end
  local set = {}
  for field, value in pairs(changes) do
    set[#set + 1] = field
    set[#set + 1] = value
    if at[field] then
      fields[at[field]] = value
    else
      fields[#fields + 1] = field
      fields[#fields + 1] = value
    end
  end
  redis.call('HSET', k, unpack(set))
  table.insert(fields, 1, id)
  out[#out + 1] = fields
end
bulk('ZREM', READY, members)
bulk('ZREM', READY_AT, ids)
bulk('ZADD', LEASED, leased)
take_tokens(bucket, #out)
return out
