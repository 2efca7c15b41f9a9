-- Read samples (global slot; prefixed by clock.lua, not by common.lua):
-- the minutes in (now - window, now] of `{ns}:sample_minutes`, each with
-- its hash (see record_samples.lua). KEYS[1]: the namespace's global
-- prefix `{<namespace>}`. ARGV: now ('' for the server's TIME), the window
-- in microseconds. Returns {minute, field, value, ...} (minutes in
-- microseconds).
local G = KEYS[1]
local now = clock(ARGV[1])
local lo = '(' .. string.format('%.0f', now - tonumber(ARGV[2]))
local hi = string.format('%.0f', now)
local out = {}
for _, minute in ipairs(redis.call('ZRANGEBYSCORE', G .. ':sample_minutes', lo, hi)) do
  local fields = redis.call('HGETALL', G .. ':sample:' .. minute)
  for j = 1, #fields, 2 do
    out[#out + 1] = minute
    out[#out + 1] = fields[j]
    out[#out + 1] = fields[j + 1]
  end
end
return out
