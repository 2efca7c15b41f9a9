-- Workflows: what a finish does to the jobs waiting for it (prepended
-- after common.lua to the scripts that finish jobs, and to the linked
-- enqueue). Standalone Redis only: a job and the jobs it waits for may
-- sit in different queues, so these steps reach into other queues' keys
-- (`use_queue`), which a cluster would refuse (design.md).
--
-- Per job W waiting in queue prefix Q, for a dependency D of prefix R:
--   R:dependants:D  hash: W -> W's queue name, every job enqueued
--                   depending on D (kept while D is live or in history)
--   R:job:D         field `dependants` = 1 while D is live and has one
--   Q:waits:W       set: the dependencies W still waits for (gone when
--                   none is left)
--   Q:job:W         fields `depends_on` (the distinct dependencies, ids
--                   joined by ','), `run_at` (the available_at it was
--                   enqueued for, while waiting), `on_failure` = run
--                   (absent: cancel); available_at WAITING_AT

-- The namespace, from the first key's prefix `<namespace>:{<queue>}`
-- (a namespace holds no brace).
local NAMESPACE = string.match(KEYS[1], '^(.-):{')
local WAKEUPS = NAMESPACE .. ':wakeups'

-- The key prefix of queue `name` (keys.rs's Keys::queue: `%`, `{`, `}`
-- escaped).
local function queue_prefix(name)
  local escaped = string.gsub(name, '[%%{}]', {['%'] = '%25', ['{'] = '%7B', ['}'] = '%7D'})
  return NAMESPACE .. ':{' .. escaped .. '}'
end

-- A padded id as JSON's number text (no leading zeros).
local function plain(id)
  local text = string.gsub(id, '^0+', '')
  if text == '' then
    return '0'
  end
  return text
end

-- queue_core::dependency_failed(dependency, status), as JSON text (the
-- id written as text: a Lua number would round a large one).
local function dependency_failed(dependency, status)
  local n = plain(dependency)
  return '{"message":"dependency ' .. n .. ' finished as ' .. status .. '","dependency":' ..
    n .. ',"status":"' .. status .. '"}'
end

-- Makes waiting job `id` (of the current queue) pending, or scheduled
-- when it was enqueued for later, and says so to its queue's workers.
local function release(id, name, now)
  local k = job_key(id)
  local f = redis.call('HMGET', k, 'priority', 'run_at')
  local at = fmt(now)
  if f[2] and tonumber(f[2]) > now then
    at = f[2]
  end
  redis.call('ZREM', DELAYED, id)
  redis.call('ZREM', IDS_DELAYED, id)
  redis.call('HSET', k, 'available_at', at, 'updated_at', fmt(now))
  redis.call('HDEL', k, 'run_at')
  place(id, f[1], at, now)
  redis.call('PUBLISH', WAKEUPS, name)
end

-- Lets the jobs waiting for `event` (an entry of `finished`) know it
-- finished: each counts it once (taking it out of its waits set), and is
-- released when it was the last, or cancelled when it failed and the job
-- does not run anyway (archive notes a cancelled job with dependants in
-- `finished` in turn). Waiters in ascending id order.
local function notify(event, now)
  local found = redis.call('HGETALL', event.prefix .. ':dependants:' .. event.id)
  local waiters = {}
  for i = 1, #found, 2 do
    waiters[#waiters + 1] = {id = found[i], queue = found[i + 1]}
  end
  table.sort(waiters, function(a, b)
    return a.id < b.id
  end)
  local failed = event.status ~= 'completed'
  for _, waiter in ipairs(waiters) do
    use_queue(queue_prefix(waiter.queue))
    local waits = P .. ':waits:' .. waiter.id
    if redis.call('SREM', waits, event.id) == 1 then
      if failed and redis.call('HGET', job_key(waiter.id), 'on_failure') ~= 'run' then
        archive(waiter.id, 'cancelled', false, dependency_failed(event.id, event.status), false,
          now, false)
      elseif redis.call('EXISTS', waits) == 0 then
        release(waiter.id, waiter.queue, now)
      end
    end
  end
end

-- Lets the dependants of every job this script archived know, in
-- ascending id order of those jobs (a job that several of them fail names
-- the lowest), each one's cancellations followed through before the next
-- (as queue-testkit's reference storage does), then returns to the
-- script's own queue.
local function settle(now)
  if #finished == 0 then
    return
  end
  local home = P
  local first = finished
  finished = {}
  table.sort(first, function(a, b)
    return a.id < b.id
  end)
  for _, event in ipairs(first) do
    local stack = {event}
    while #stack > 0 do
      notify(table.remove(stack), now)
      for _, next_event in ipairs(finished) do
        stack[#stack + 1] = next_event
      end
      finished = {}
    end
  end
  use_queue(home)
end
