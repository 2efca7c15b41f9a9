-- Prefixed to every script (scripts.rs): the time a script works at, in
-- microseconds since the epoch: its argument when the storage reads a
-- manual clock, else the server's TIME (so every host agrees).
local function clock(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

