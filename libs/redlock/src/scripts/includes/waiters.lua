-- The waiters' queue of a resource, shared by acquire, release and leave (scripts.ts puts this
-- file where a script says `-- @include waiters`). Its keys: `<base>queue` (members
-- '<lease value>|<inbox>', or '<lease value>|<inbox>|<ttl>' for a waiter the lock may be handed
-- to, by ticket; neither a value nor an inbox holds '|') and `<base>due` (their deadlines on this
-- node's clock). A handoff (serveFirst) sets the lock to the first waiter's value for its ttl,
-- raises the fence to the releasing lease's token + 1 and marks `<base>handed` with the value.
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
  -- A waiter's queue member; with `ttl`, one the lock may be handed to (for that many ms).
  function q.member(value, inbox, ttl)
    return ttl and value .. '|' .. inbox .. '|' .. ttl or value .. '|' .. inbox
  end
  -- Returns the first live waiter and its deadline (nil when none). Waiters whose deadline passed
  -- are dropped once one of them is first: the common case reads the first one alone.
  function q.head(base)
    local queue, due = base .. 'queue', base .. 'due'
    local first = redis.call('ZRANGE', queue, 0, 0)[1]
    local deadline = first and tonumber(redis.call('ZSCORE', due, first))
    if deadline and deadline > q.now() then
      return first, deadline
    end
    if not first then
      return nil
    end
    local expired = redis.call('ZRANGEBYSCORE', due, '-inf', q.now())
    if #expired > 0 then
      redis.call('ZREM', queue, unpack(expired))
      redis.call('ZREMRANGEBYSCORE', due, '-inf', q.now())
    end
    first = redis.call('ZRANGE', queue, 0, 0)[1]
    return first, first and tonumber(redis.call('ZSCORE', due, first))
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
  -- Serves the first waiter, once the lock is free to give: hands it the lock with `token` as its
  -- fence when there is one, the waiter asked for a handoff, the token is above this node's fence
  -- (or, `reuse`: a handoff given back unused, equal to it) and the waiter hears its inbox; else
  -- reserves the lock ('|') for it until its deadline and publishes its lease value on its inbox
  -- (its next attempt takes it). False when no waiter is left; 'handed' after a handoff.
  -- `stored`: this node's fence when the caller read it already (false: none). A handoff tells
  -- the waiter '<value>|<token>' first (PUBLISH counts who heard it), then sets the lock for
  -- the waiter's ttl, the fence and the `handed` mark, and takes the waiter out of the queue.
  function q.serveFirst(base, lock, token, reuse, stored)
    local first, deadline = q.head(base)
    if not first then
      return false
    end
    local waiter, inbox, ttl = string.match(first, '^([^|]*)|([^|]*)|?(%d*)$')
    if token and ttl ~= '' and inbox ~= '' then
      local fence = base .. 'fence'
      if stored == nil then
        stored = redis.call('GET', fence)
      end
      -- Decimal integers without leading zeros (acquire.lua): the longer is the greater.
      local above = not stored
        or #token > #stored
        or #token == #stored and (token > stored or reuse and token == stored)
      if above and redis.call('PUBLISH', inbox, waiter .. '|' .. token) > 0 then
        redis.call('SET', lock, waiter, 'PX', ttl)
        -- The fence outlives the lock it guards (its retention, or at least the ttl).
        redis.call('SET', fence, token, 'KEEPTTL')
        redis.call('PEXPIRE', fence, ttl, 'GT')
        redis.call('SET', base .. 'handed', waiter, 'PX', ttl)
        q.dequeue(base, first)
        return 'handed'
      end
      -- Not heard (its subscription is gone): reserved, as for a waiter that did not ask.
      if above then
        inbox = ''
      end
    end
    redis.call('SET', lock, '|', 'PXAT', deadline)
    if inbox ~= '' then
      redis.call('PUBLISH', inbox, waiter)
    end
    return true
  end
  -- Passes the lock on (see serveFirst): to the next waiter, or, with none left, frees the lock and
  -- publishes the release on the resource's channel.
  function q.passOn(base, lock, token, reuse)
    if not q.serveFirst(base, lock, token, reuse) then
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
