-- The waiters' queue of a resource, shared by acquire, release and leave (scripts.ts puts this
-- file where a script says `-- @include waiters`). Its keys: `<base>queue` (members
-- '<lease value>|<inbox>' by ticket) and `<base>due` (their deadlines on this node's clock).
local nowMs
-- This node's clock, ms (TIME read once per call).
local function now()
  if not nowMs then
    local time = redis.call('TIME')
    nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return nowMs
end
-- Drops waiters whose deadline passed; returns the first waiter left and its deadline (nil when none).
local function head(base)
  local queue, due = base .. 'queue', base .. 'due'
  local expired = redis.call('ZRANGEBYSCORE', due, '-inf', now())
  if #expired > 0 then
    redis.call('ZREM', queue, unpack(expired))
    redis.call('ZREMRANGEBYSCORE', due, '-inf', now())
  end
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  return first, first and redis.call('ZSCORE', due, first)
end
-- Reserves the lock ('|') for the first waiter until its deadline and publishes its lease value on
-- its inbox; false when no waiter is left.
local function reserveForFirst(base, lock)
  local first, deadline = head(base)
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
