-- Upgrade from key layout 1 or 2, idempotent.
-- From layout 1: drops the pending-by-available_at index (P:ready_at) and
-- builds LEVELS from READY: the first member of each priority level is
-- its oldest job (members start with the padded available_at), one range
-- query per level.
-- From layout 2: builds the id indexes of the listings (IDS_READY,
-- IDS_DELAYED, IDS_LEASED) from READY, DELAYED and LEASED, in chunks.
-- Returns the number of levels.
redis.call('DEL', P .. ':ready_at')
redis.call('DEL', LEVELS)
local level = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
while level[1] do
  redis.call('ZADD', LEVELS, tonumber(string.sub(level[1], 1, 19)), level_name(level[2]))
  level = redis.call('ZRANGE', READY, '(' .. level[2], '+inf', 'BYSCORE', 'LIMIT', 0, 1,
    'WITHSCORES')
end
local step = 2000
for _, pair in ipairs({{READY, IDS_READY}, {DELAYED, IDS_DELAYED}, {LEASED, IDS_LEASED}}) do
  local from, index = pair[1], pair[2]
  redis.call('DEL', index)
  local start = 0
  while true do
    local members = redis.call('ZRANGE', from, start, start + step - 1)
    if #members == 0 then
      break
    end
    local add = {}
    for _, member in ipairs(members) do
      add[#add + 1] = 0
      if from == READY then
        add[#add + 1] = id_of_ready(member)
      else
        add[#add + 1] = member
      end
    end
    redis.call('ZADD', index, unpack(add))
    start = start + step
  end
end
return redis.call('ZCARD', LEVELS)
