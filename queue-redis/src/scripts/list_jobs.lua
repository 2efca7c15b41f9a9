-- List jobs: live jobs of one queue, ids descending, below `before` when
-- set, in `state` (derived at now) when set, only job `id` or only the
-- holder of unique key `key` when set. Reads every live id of the queue
-- when neither id nor key is given: an operator's listing, not a hot path.
-- ARGV: now, state ('' for any), before (padded id or ''), n, id (padded
-- or ''), key ('' for none). Returns {{id, field, value, ...}, ...}.
local now = clock(ARGV[1])
local want, before, n, key = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[6]
local ids = {}
if ARGV[5] ~= '' then
  ids = {ARGV[5]}
elseif key ~= '' then
  local id = redis.call('HGET', UNIQUE, key)
  if id then
    ids = {id}
  end
else
  for _, member in ipairs(redis.call('ZRANGE', READY, 0, -1)) do
    ids[#ids + 1] = id_of_ready(member)
  end
  for _, index in ipairs({DELAYED, LEASED}) do
    for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do
      ids[#ids + 1] = id
    end
  end
end
table.sort(ids, function(a, b) return a > b end)
local out = {}
for _, id in ipairs(ids) do
  if #out >= n then
    break
  end
  if before == '' or id < before then
    local f = redis.call('HMGET', job_key(id), 'lease_until', 'attempts', 'max_attempts',
      'available_at', 'unique_key')
    if f[4] and (key == '' or f[5] == key) then
      local state
      if f[1] then
        state = tonumber(f[1]) > now and 'running' or 'stalled'
      elseif tonumber(f[2]) >= tonumber(f[3]) then
        state = 'exhausted'
      elseif tonumber(f[4]) <= now then
        state = 'pending'
      else
        state = 'scheduled'
      end
      if want == '' or want == state then
        local fields = redis.call('HGETALL', job_key(id))
        table.insert(fields, 1, id)
        out[#out + 1] = fields
      end
    end
  end
end
return out
