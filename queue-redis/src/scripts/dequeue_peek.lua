-- Peek: the best `n` pending jobs of one queue without claiming them
-- (after promoting scheduled jobs that came due), no more than its limits
-- allow and its groups' slots leave (the claim checks both again);
-- nothing while paused.
-- A dequeue over several queues peeks each, picks the best overall, then
-- claims the chosen count from each queue.
-- ARGV: now, n. Returns {member, score, effective priority, ...} best
-- first (the effective priority is the priority but on an aging queue; a
-- fair queue's in its fair order).
local now = clock(ARGV[1])
if redis.call('EXISTS', PAUSED) == 1 then
  return {}
end
promote(now)
local n = tonumber(ARGV[2])
local allowed = allowance(now)
if allowed and allowed < n then
  n = allowed
end
if n <= 0 then
  return {}
end
if is_fair() then
  -- The jobs alone (the turns it read are the claim's).
  local picked = pick_fair(n, group_slots(), now)
  return picked
end
return pick_ready(n, group_slots(), now)
