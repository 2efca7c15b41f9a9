-- Job links: what one job of the queue is linked to (workflow.lua's
-- keys), live or in history.
-- ARGV: now (unused), padded id. Returns {} when the job is neither live
-- nor in history, else {its dependencies as written (ids joined by ',',
-- '' for none), the ids of its dependants...}.
local id = ARGV[2]
local depends_on = redis.call('HGET', job_key(id), 'depends_on')
if not depends_on then
  if redis.call('EXISTS', job_key(id)) == 0 and redis.call('EXISTS', hist_key(id)) == 0 then
    return {}
  end
  depends_on = redis.call('HGET', hist_key(id), 'depends_on') or ''
end
local out = {depends_on}
for _, dependant in ipairs(redis.call('HKEYS', P .. ':dependants:' .. id)) do
  out[#out + 1] = dependant
end
return out
