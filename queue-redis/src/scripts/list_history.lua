-- History page: up to `n` rows of one queue, ids descending, below
-- `before` when set, of one status when set.
-- ARGV: status ('' for any), before (padded id or ''), n.
-- Returns {{id, field, value, ...}, ...}.
local index = HIST_IDS
if ARGV[1] ~= '' then
  index = HIST_IDS .. ':' .. ARGV[1]
end
local max = '+'
if ARGV[2] ~= '' then
  max = '(' .. ARGV[2]
end
local ids = redis.call('ZREVRANGEBYLEX', index, max, '-', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local fields = redis.call('HGETALL', hist_key(id))
  if #fields > 0 then
    table.insert(fields, 1, id)
    out[#out + 1] = fields
  end
end
return out
