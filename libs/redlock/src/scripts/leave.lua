--[[
  leave: takes waiters out of their resources' queues (acquires that gave up
  between attempts: aborted, or their claim granted to another). Where the lock
  is reserved ('|') for a waiter that leaves as the first of the queue, the
  reservation passes to the next waiter (its lease value published on its
  inbox) or, with none left, the lock is freed and the release published on the
  resource's channel: a waiter that leaves holds nobody up until its place
  expires.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `lock`, `queue`, `due` and `released` (the resource's channel).

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    for resource i: ARGV[i] the waiter's queue member '<lease value>|<inbox>'
  Returns an array, one code per resource:
    1  LEFT        the waiter was queued and is no longer
    0  NOT_QUEUED  the waiter was not queued (its place expired, or it never got one)
]]
-- Drops waiters whose deadline passed; returns the first waiter left and its deadline (nil when none).
local function head(queue, due)
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local expired = redis.call('ZRANGEBYSCORE', due, '-inf', now)
  if #expired > 0 then
    redis.call('ZREM', queue, unpack(expired))
    redis.call('ZREMRANGEBYSCORE', due, '-inf', now)
  end
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  return first, first and redis.call('ZSCORE', due, first)
end
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock, queue, due = base .. 'lock', base .. 'queue', base .. 'due'
  local member = ARGV[i]
  local wasFirst = redis.call('ZRANGE', queue, 0, 0)[1] == member
  out[i] = redis.call('ZREM', queue, member)
  redis.call('ZREM', due, member)
  if wasFirst and redis.call('GET', lock) == '|' then
    local first, deadline = head(queue, due)
    if first then
      redis.call('SET', lock, '|', 'PXAT', deadline)
      local waiter, inbox = string.match(first, '^([^|]*)|(.*)$')
      if inbox ~= '' then
        redis.call('PUBLISH', inbox, waiter)
      end
    else
      redis.call('DEL', lock)
      redis.call('PUBLISH', base .. 'released', '')
    end
  end
end
return out
