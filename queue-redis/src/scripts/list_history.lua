-- History page: up to `n` rows of one queue, ids descending, below
-- `before` when set, of one status when set (else merged over the three).
-- ARGV: status ('' for any), before (padded id or ''), n.
-- Returns {{id, field, value, ...}, ...}.
local statuses = STATUSES
if ARGV[1] ~= '' then
  statuses = {ARGV[1]}
end
local max = '+'
if ARGV[2] ~= '' then
  max = '(' .. ARGV[2]
end
local n = tonumber(ARGV[3])
local ids = {}
for _, s in ipairs(statuses) do
  for _, id in ipairs(redis.call('ZREVRANGEBYLEX', HIST_IDS .. ':' .. s, max, '-', 'LIMIT', 0, n)) do
    ids[#ids + 1] = id
  end
end
table.sort(ids, function(a, b) return a > b end)
local out = {}
for i = 1, math.min(n, #ids) do
  local fields = redis.call('HGETALL', hist_key(ids[i]))
  if #fields > 0 then
    table.insert(fields, 1, ids[i])
    out[#out + 1] = fields
  end
end
return out
