-- Link status: where jobs of the queue stand, for job_links.
-- ARGV: now, padded ids... Returns {now, then per id: {'live',
-- available_at, lease_until or '', attempts, max_attempts} | {'finished',
-- status, result or ''} | {'gone'}}.
local now = clock(ARGV[1])
local out = {fmt(now)}
for i = 2, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', job_key(id), 'available_at', 'lease_until', 'attempts',
    'max_attempts')
  if f[1] then
    out[#out + 1] = {'live', f[1], f[2] or '', f[3], f[4]}
  else
    local h = redis.call('HMGET', hist_key(id), 'status', 'result')
    if h[1] then
      out[#out + 1] = {'finished', h[1], h[2] or ''}
    else
      out[#out + 1] = {'gone'}
    end
  end
end
return out
