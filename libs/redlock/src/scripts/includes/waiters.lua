-- The waiters' queue of a resource, shared by acquire, release and leave (scripts.ts puts this
-- file where a script says `-- @include waiters`). Its keys: `<base>queue`, the waiters' lease
-- values ordered by ticket (a value holds no '|'), and for each waiter `<base>waiter:<value>`,
-- its record until its deadline on this node's clock (PX): its inbox ('' = none), followed, for a
-- waiter the lock may be handed to, by '|<ttl>|<fence retention>'. A waiter whose record expired
-- is dropped when it comes first. A handoff (serveFirst) sets the lock to the first waiter's value
-- for its ttl, raises the fence to the releasing lease's token + 1, takes the waiter out of the
-- queue and leaves `handed` in its record key for the ttl (the mark a late attempt or a release of
-- that value reads).
-- Plain local functions, not a table of them: every function a script defines is a new closure on
-- each call, which a script's common case, returning before this file's place, never pays for.
-- The key of a waiter's record (its `handed` mark after a handoff).
local function waiterKey(base, value)
  return base .. 'waiter:' .. value
end
local nowMs
-- This node's clock, ms (TIME read once per call).
local function now()
  if not nowMs then
    local time = redis.call('TIME')
    nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return nowMs
end
-- A waiter's record (see above); with `ttl`, one the lock may be handed to.
local function record(inbox, ttl, retention)
  return ttl and inbox .. '|' .. ttl .. '|' .. retention or inbox
end
-- Returns the first live waiter and its record (nil when none), dropping the dead before it.
local function head(base)
  local queue = base .. 'queue'
  while true do
    local first = redis.call('ZRANGE', queue, 0, 0)[1]
    if not first then
      return nil
    end
    local record = redis.call('GET', waiterKey(base, first))
    if record then
      return first, record
    end
    redis.call('ZREM', queue, first)
  end
end
-- How long the place of a live waiter still lasts, ms (at least 1: a PX).
local function remaining(base, value)
  return math.max(redis.call('PTTL', waiterKey(base, value)), 1)
end
-- Takes (or keeps, by ticket) a place in the queue for `wait` ms.
local function enqueue(base, value, record, ticket, wait)
  local queue = base .. 'queue'
  redis.call('ZADD', queue, 'NX', ticket, value)
  redis.call('PEXPIRE', queue, wait)
  redis.call('SET', waiterKey(base, value), record, 'PX', wait)
end
local function dequeue(base, value)
  redis.call('ZREM', base .. 'queue', value)
  redis.call('DEL', waiterKey(base, value))
end
-- Serves the first waiter, once the lock is free to give: hands it the lock with `token` as its
-- fence when there is one, the waiter asked for a handoff, the token is above this node's fence
-- (or, `reuse`: a handoff given back unused, equal to it) and the waiter hears its inbox; else
-- reserves the lock ('|') for it until its deadline and publishes its lease value on its inbox
-- (its next attempt takes it). False when no waiter is left; 'handed' after a handoff.
-- `stored`: this node's fence when the caller read it already (false: none). A handoff tells
-- the waiter '<value>|<token>' first (PUBLISH counts who heard it), then sets the lock, the
-- fence and the `handed` mark, and takes the waiter out of the queue.
local function serveFirst(base, lock, token, reuse, stored)
  local first, record = head(base)
  if not first then
    return false
  end
  local inbox, ttl, retention = string.match(record, '^([^|]*)|(%d+)|(%d+)$')
  if not inbox then
    inbox = record
  elseif token then
    local fence = base .. 'fence'
    if stored == nil then
      stored = redis.call('GET', fence)
    end
    -- Decimal integers without leading zeros (acquire.lua): the longer is the greater.
    local above = not stored
      or #token > #stored
      or #token == #stored and (token > stored or reuse and token == stored)
    if above and redis.call('PUBLISH', inbox, first .. '|' .. token) > 0 then
      redis.call('SET', lock, first, 'PX', ttl)
      -- The fence outlives the lock it guards, as a grant's does (acquire.lua).
      redis.call('SET', fence, token, 'PX', retention)
      redis.call('SET', waiterKey(base, first), 'handed', 'PX', ttl)
      redis.call('ZREM', base .. 'queue', first)
      return 'handed'
    end
    -- Not heard (its subscription is gone): reserved, as for a waiter that did not ask.
    if above then
      inbox = ''
    end
  end
  redis.call('SET', lock, '|', 'PX', remaining(base, first))
  if inbox ~= '' then
    redis.call('PUBLISH', inbox, first)
  end
  return true
end
-- Passes the lock on (see serveFirst): to the next waiter, or, with none left, frees the lock and
-- publishes the release on the resource's channel.
local function passOn(base, lock, token, reuse)
  if not serveFirst(base, lock, token, reuse) then
    redis.call('DEL', lock)
    redis.call('PUBLISH', base .. 'released', '')
  end
end
-- Takes `value` out of the queue; true when it was the first live waiter.
local function dequeueValue(base, value)
  local first = head(base)
  dequeue(base, value)
  return first == value
end
