-- List jobs: live jobs of one queue, ids descending, below `before` when
-- set, in `state` (derived at now) when set, only job `id` or only the
-- holder of unique key `key` when set.
-- A page reads about `n` members of the id indexes (IDS_READY,
-- IDS_DELAYED, IDS_LEASED), whatever the backlog, and `n` job hashes:
--   any state: the newest `n` of each id index, merged;
--   pending: the newest `n` of IDS_READY, merged with the newest `n`
--     DELAYED jobs already due (not promoted yet: no claim ran since);
--   scheduled: DELAYED jobs not due, before WAITING_AT; waiting: those
--     at WAITING_AT (workflows); running and stalled: LEASED jobs
--     whose lease runs past now, or not;
--   exhausted: none (every script archives a job whose last attempt
--     ends, so no unheld job has attempts left at 0).
-- A state that is a time range of DELAYED or LEASED (`in_range`) is read
-- whichever way reads fewer ids: by that range (all `c` of its members,
-- sorted), or by walking the id index and keeping the members in range
-- (ZMSCORE, a page at a time), which reads about `n * t / c` ids of the
-- set's `t` when the wanted members are spread through it. The range wins
-- when `c * c <= n * t`, so either way a page reads at most about
-- sqrt(n * t) ids: 900 running jobs of 1,000 leased are walked (57 ids
-- for a page of 51), 100 stalled ones read by range. The members passed
-- over are the other side of now (due DELAYED jobs, which the next claim
-- promotes, or expired leases, which the next reclaim ends).
-- ARGV: now, state ('' for any), before (padded id or ''), n, id (padded
-- or ''), key ('' for none). Returns {{id, field, value, ...}, ...}.
local now = clock(ARGV[1])
local want, before, n, key = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[6]
local top = '+'
if before ~= '' then
  top = '(' .. before
end

local function newer(a, b)
  return a > b
end

-- The first `n` ids of id-descending lists, merged.
local function merge(lists)
  local all = {}
  for _, list in ipairs(lists) do
    for _, id in ipairs(list) do
      all[#all + 1] = id
    end
  end
  table.sort(all, newer)
  local out = {}
  for i = 1, math.min(n, #all) do
    out[i] = all[i]
  end
  return out
end

-- The newest `n` ids of id index `index` below `before`.
local function newest(index)
  return redis.call('ZREVRANGEBYLEX', index, top, '-', 'LIMIT', 0, n)
end

-- The newest `n` ids below `before` of the members of `zset` scored from
-- `min` to `max` (range syntax; `keep` tests a score against the same
-- range), `index` being `zset`'s id index.
local function in_range(zset, index, min, max, keep)
  local count = redis.call('ZCOUNT', zset, min, max)
  if count == 0 then
    return {}
  end
  if count * count <= n * redis.call('ZCARD', zset) then
    -- Sorted by Lua's own comparison (no Lua function called per
    -- comparison) and taken from the end.
    local found = redis.call('ZRANGE', zset, min, max, 'BYSCORE')
    table.sort(found)
    local out = {}
    for i = #found, 1, -1 do
      if #out >= n then
        break
      end
      if before == '' or found[i] < before then
        out[#out + 1] = found[i]
      end
    end
    return out
  end
  local out, from, page = {}, top, math.max(n, 64)
  while #out < n do
    local ids = redis.call('ZREVRANGEBYLEX', index, from, '-', 'LIMIT', 0, page)
    if #ids == 0 then
      break
    end
    local scores = redis.call('ZMSCORE', zset, unpack(ids))
    for i = 1, #ids do
      if scores[i] and keep(tonumber(scores[i])) then
        out[#out + 1] = ids[i]
        if #out >= n then
          break
        end
      end
    end
    if #ids < page then
      break
    end
    from = '(' .. ids[#ids]
    page = math.min(page * 2, 2000)
  end
  return out
end

local function due(score)
  return score <= now
end

local function later(score)
  return score > now
end

local function scheduled(score)
  return score > now and score < WAITING_FROM
end

local function waits(score)
  return score >= WAITING_FROM
end

local out = {}
if ARGV[5] ~= '' or key ~= '' then
  -- One job at most: read it and derive its state.
  local id = ARGV[5]
  if id == '' then
    id = redis.call('HGET', UNIQUE, key)
  end
  if id and (before == '' or id < before) then
    local f = redis.call('HMGET', job_key(id), 'lease_until', 'attempts', 'max_attempts',
      'available_at', 'unique_key')
    if f[4] and (key == '' or f[5] == key) then
      local state
      if f[1] then
        state = tonumber(f[1]) > now and 'running' or 'stalled'
      elseif is_waiting(f[4]) then
        state = 'waiting'
      elseif tonumber(f[2]) >= tonumber(f[3]) then
        state = 'exhausted'
      elseif tonumber(f[4]) <= now then
        state = 'pending'
      else
        state = 'scheduled'
      end
      if want == '' or want == state then
        out[1] = read_job(id)
      end
    end
  end
  return out
end

local ids = {}
local n_text = fmt(now)
if want == '' then
  ids = merge({newest(IDS_READY), newest(IDS_DELAYED), newest(IDS_LEASED)})
elseif want == 'pending' then
  ids = merge({newest(IDS_READY), in_range(DELAYED, IDS_DELAYED, '-inf', n_text, due)})
elseif want == 'scheduled' then
  ids = in_range(DELAYED, IDS_DELAYED, '(' .. n_text, '(' .. WAITING_AT, scheduled)
elseif want == 'waiting' then
  ids = in_range(DELAYED, IDS_DELAYED, WAITING_AT, '+inf', waits)
elseif want == 'running' then
  ids = in_range(LEASED, IDS_LEASED, '(' .. n_text, '+inf', later)
elseif want == 'stalled' then
  ids = in_range(LEASED, IDS_LEASED, '-inf', n_text, due)
end
for _, id in ipairs(ids) do
  local row = read_job(id)
  if row then
    out[#out + 1] = row
  end
end
return out
