-- The waiters' queue of a resource, shared by acquire, release and leave (scripts.ts puts this
-- file where a script says `-- @include waiters`). Its keys: `<base>queue` (members
-- '<lease value>|<inbox>' by ticket) and `<base>due` (their deadlines on this node's clock).
-- A script makes the helpers with waiters() on a waiter's path only: every function a script
-- defines is a new closure on each call, which the common path (nobody waits) need not pay for.
local function waiters()
  local q = {}
  local nowMs
  -- This node's clock, ms (TIME read once per call).
  function q.now()
    if not nowMs then
      local time = redis.call('TIME')
      nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    end
    return nowMs
  end
  -- Drops waiters whose deadline passed; returns the first waiter left and its deadline (nil when none).
  function q.head(base)
    local queue, due = base .. 'queue', base .. 'due'
    local expired = redis.call('ZRANGEBYSCORE', due, '-inf', q.now())
    if #expired > 0 then
      redis.call('ZREM', queue, unpack(expired))
      redis.call('ZREMRANGEBYSCORE', due, '-inf', q.now())
    end
    local first = redis.call('ZRANGE', queue, 0, 0)[1]
    return first, first and redis.call('ZSCORE', due, first)
  end
  -- Takes (or keeps, by ticket) a place in the queue for `wait` ms.
  function q.enqueue(base, member, ticket, wait)
    local queue, due = base .. 'queue', base .. 'due'
    redis.call('ZADD', queue, 'NX', ticket, member)
    redis.call('ZADD', due, q.now() + wait, member)
    redis.call('PEXPIRE', queue, wait)
    redis.call('PEXPIRE', due, wait)
  end
  function q.dequeue(base, member)
    redis.call('ZREM', base .. 'queue', member)
    redis.call('ZREM', base .. 'due', member)
  end
  -- Reserves the lock ('|') for the first waiter until its deadline and publishes its lease value on
  -- its inbox; false when no waiter is left.
  function q.reserveForFirst(base, lock)
    local first, deadline = q.head(base)
    if not first then
      return false
    end
    redis.call('SET', lock, '|', 'PXAT', deadline)
    local waiter, inbox = string.match(first, '^([^|]*)|(.*)$')
    if inbox ~= '' then
      redis.call('PUBLISH', inbox, waiter)
    end
    return true
  end
  -- Passes a reservation on: to the next waiter, or, with none left, frees the lock and publishes
  -- the release on the resource's channel.
  function q.passOn(base, lock)
    if not q.reserveForFirst(base, lock) then
      redis.call('DEL', lock)
      redis.call('PUBLISH', base .. 'released', '')
    end
  end
  -- Takes every place `value` has in the queue out (members '<value>|<inbox>': a value holds no
  -- '|'); true when one of them was the first live waiter.
  function q.dequeueValue(base, value)
    local prefix = value .. '|'
    local first = q.head(base)
    for _, member in ipairs(redis.call('ZRANGE', base .. 'queue', 0, -1)) do
      if string.sub(member, 1, #prefix) == prefix then
        q.dequeue(base, member)
      end
    end
    return first ~= nil and string.sub(first, 1, #prefix) == prefix
  end
  return q
end
