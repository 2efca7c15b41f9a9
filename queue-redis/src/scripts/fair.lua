-- Fair claiming between groups: the pick, the turns, and the per-group
-- files' build and drop (prepended after common.lua to the scripts that
-- use them: dequeue, dequeue_peek, configure_queue; the filing itself is
-- in common.lua, which every script that adds or takes a pending job runs).
-- Also prepended to set_group_weight and group_weights, for WEIGHTS.

-- Hash: group key -> its own weight in the queue's fair claims (absent:
-- weight 1; the jobs without a group key always weigh 1). Here rather
-- than in common.lua: only the fair pick and the weights' own scripts
-- read it.
local WEIGHTS = P .. ':group_weights'

-- Whether `group` (false: no group key) has no slot left in `slots`.
local function slot_full(slots, group)
  if not (slots and group) then
    return false
  end
  local limit = slots.limits[group] or slots.default
  return limit ~= nil and (slots.held[group] or 0) >= limit
end

-- Whether fair candidate `a` ({member, eff, turn}) comes before `b`:
-- higher effective priority, then the lower turn, then earlier
-- available_at, then lower id.
local function fair_before(a, b)
  if a.eff ~= b.eff then
    return a.eff > b.eff
  end
  if a.turn ~= b.turn then
    return a.turn < b.turn
  end
  return a.member < b.member
end

-- A group's stored turn (a TURNS value) as {at, taken}
-- (queue_core::backend::FairTurn): `<at>` when it has taken nothing
-- towards its weight, `<at>:<taken>` when it has; false (no field) is a
-- group never served.
local function read_turn(raw)
  if not raw then
    return {at = 0, taken = 0}
  end
  local at, taken = string.match(raw, '^(%d+):(%d+)$')
  if at then
    return {at = tonumber(at), taken = tonumber(taken)}
  end
  return {at = tonumber(raw) or 0, taken = 0}
end

-- A turn as TURNS stores it (see read_turn).
local function turn_text(turn)
  if turn.taken == 0 then
    return fmt(turn.at)
  end
  return fmt(turn.at) .. ':' .. fmt(turn.taken)
end

-- The turn after taking one job of a group of `weight`, the queue's claim
-- count becoming `count` (queue_core::backend::FairTurn::take): the group
-- keeps its place until it has taken `weight` jobs, then goes behind every
-- other.
local function take_turn(turn, weight, count)
  local taken = turn.taken + 1
  if taken >= weight then
    return {at = count, taken = 0}
  end
  return {at = turn.at, taken = taken}
end

-- The best `n` pending jobs of a fair queue at `now` as {member, score,
-- effective priority, ...} in its fair order (queue_core::fair_order; the
-- same walk as queue_core::backend::pick_fair): the groups with pending
-- jobs (FAIR_GROUPS, and FAIR_NONE) but full ones, each group's levels
-- (on an aging queue; else its whole set is one), each level's jobs read
-- a page at a time; the next job is the best group head by effective
-- priority, turn (TURNS' `at`; 0 for a group never served), available_at,
-- id, and taking it counts towards its group's weight (WEIGHTS, 1
-- without one): the job that makes it `weight` puts the group's turn
-- behind every other. A group that fills up is left out. It reads a
-- member or two per group and level, the jobs it takes, the turns (one
-- HMGET a thousand groups) and the weights (one HGETALL), not any
-- group's backlog.
-- Also returns what advance_turns replays the claim's jobs on: each
-- group's stored turn (`turns`, never changed: take_turn makes a new
-- one) and weight (`weights`), by group key ('' for the jobs without one).
local function pick_fair(n, slots, now)
  local period = aging_period()
  local keys, fields = {false}, {''}
  for _, group in ipairs(redis.call('ZRANGE', FAIR_GROUPS, 0, -1)) do
    keys[#keys + 1] = group
    fields[#fields + 1] = group
  end
  -- Every group's turn in one HMGET a thousand groups.
  local stored = {turns = {}, weights = {}}
  for i = 1, #fields, 1000 do
    local got = redis.call('HMGET', TURNS, unpack(fields, i, math.min(i + 999, #fields)))
    for j = 1, #got do
      stored.turns[fields[i + j - 1]] = read_turn(got[j])
    end
  end
  local own = redis.call('HGETALL', WEIGHTS)
  for i = 1, #own, 2 do
    -- '' is no group key: the jobs without one weigh 1.
    if own[i] ~= '' then
      stored.weights[own[i]] = math.max(1, tonumber(own[i + 1]) or 1)
    end
  end
  local groups, count = {}, 0
  for k, key in ipairs(keys) do
    if not slot_full(slots, key) then
      local set = fair_set(key)
      local levels = {}
      if period then
        local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
        while first[1] do
          levels[#levels + 1] = {min = first[2], max = first[2], rows = {}, at = 1, read = 0}
          first = redis.call('ZRANGE', set, '(' .. first[2], '+inf', 'BYSCORE', 'LIMIT', 0, 1,
            'WITHSCORES')
        end
      else
        -- The whole set as one level (empty for FAIR_NONE without jobs:
        -- its first read finds nothing and ends it).
        levels[1] = {min = '-inf', max = '+inf', rows = {}, at = 1, read = 0}
      end
      local turn = stored.turns[fields[k]]
      count = math.max(count, turn.at)
      groups[#groups + 1] = {key = key, set = set, turn = turn,
        weight = stored.weights[fields[k]] or 1, levels = levels}
    end
  end
  local out = {}
  while #out < 3 * n do
    local page = math.min(n - #out / 3, 16)
    local best, best_group, best_level = nil, nil, nil
    for _, group in ipairs(groups) do
      for _, level in ipairs(group.levels) do
        if level.at > #level.rows and not level.done then
          -- One member on a level's first read, a page after.
          local want = level.read == 0 and 1 or page
          local got = redis.call('ZRANGE', group.set, level.min, level.max, 'BYSCORE', 'LIMIT',
            level.read, want, 'WITHSCORES')
          level.rows, level.at = {}, 1
          for i = 1, #got, 2 do
            level.rows[#level.rows + 1] = {member = got[i], score = got[i + 1],
              eff = effective(got[i], got[i + 1], now, period)}
          end
          level.read = level.read + #level.rows
          level.done = #level.rows < want
        end
        local row = level.rows[level.at]
        if row then
          local head = {member = row.member, eff = row.eff, turn = group.turn.at}
          if not best or fair_before(head, best) then
            best, best_group, best_level = head, group, level
          end
        end
      end
    end
    if not best then
      break
    end
    local row = best_level.rows[best_level.at]
    best_level.at = best_level.at + 1
    if slots and best_group.key and not take_slot(slots, best_group.key) then
      -- Full: none of its other jobs can be taken by this claim.
      best_group.levels = {}
    else
      count = count + 1
      best_group.turn = take_turn(best_group.turn, best_group.weight, count)
      out[#out + 1] = row.member
      out[#out + 1] = row.score
      out[#out + 1] = fmt(row.eff)
    end
  end
  return out, stored
end

-- After a claim of a fair queue took the jobs of `groups` (each job's
-- group key, '' for none, in the order the claim returns them: its pick's
-- first ones, maybe not all), `stored` the turns and weights its pick
-- read: the queue's claim count goes up by one per job, and each job
-- counts towards its group's weight, replayed from the stored turn
-- (take_turn): a group whose job made its weight gets the count at that
-- job as its turn, and every group keeps the jobs it has taken since.
local function advance_turns(groups, stored)
  if #groups == 0 then
    return
  end
  local count = redis.call('INCRBY', CLAIMS, #groups) - #groups
  local turns = {}
  for k, group in ipairs(groups) do
    local turn = turns[group] or stored.turns[group] or read_turn(false)
    turns[group] = take_turn(turn, stored.weights[group] or 1, count + k)
  end
  local set = {}
  for group, turn in pairs(turns) do
    set[#set + 1] = group
    set[#set + 1] = turn_text(turn)
  end
  redis.call('HSET', TURNS, unpack(set))
end

-- Files every pending job of READY under its group (configure_queue
-- making the queue fair), a page at a time: one HGET per pending job.
local function fair_build()
  local start, page = 0, 1000
  while true do
    local got = redis.call('ZRANGE', READY, start, start + page - 1, 'WITHSCORES')
    local by_group, none = {}, {}
    for i = 1, #got, 2 do
      local group = redis.call('HGET', job_key(id_of_ready(got[i])), 'group_key')
      local list = none
      if group then
        list = by_group[group] or {}
        by_group[group] = list
      end
      list[#list + 1] = got[i + 1]
      list[#list + 1] = got[i]
    end
    fair_add(false, none)
    for group, list in pairs(by_group) do
      fair_add(group, list)
    end
    if #got < 2 * page then
      return
    end
    start = start + page
  end
end

-- Drops the per-group files of a queue that stops being fair (its turns
-- and claim count stay, as a SQL backend keeps them).
local function fair_drop()
  for _, group in ipairs(redis.call('ZRANGE', FAIR_GROUPS, 0, -1)) do
    redis.call('UNLINK', fair_set(group))
  end
  redis.call('UNLINK', FAIR_GROUPS, FAIR_NONE)
end
