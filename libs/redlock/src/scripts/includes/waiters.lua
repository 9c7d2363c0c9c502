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
  return q
end
