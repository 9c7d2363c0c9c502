--[[
  leave: takes waiters out of their resources' queues (acquires that gave up
  between attempts: aborted, or their claim granted to another). Where the lock
  is reserved ('|') for a waiter that leaves as the first of the queue, or was
  handed to it by a release (its record says `handed`), the reservation passes
  to the next waiter (its lease value published on its inbox) or, with none
  left, the lock is freed and the release published on the resource's channel:
  a waiter that leaves holds nobody up until its place expires.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `lock`, `fence`, `queue`, `waiter:<value>` and `released` (the
  resource's channel).

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    for resource i: ARGV[i] the waiter's lease value
  Returns one code per resource, or the code alone when every resource's is the
  same (includes/reply.lua):
    1  LEFT        the waiter was queued, or handed the lock, and is no longer
    0  NOT_QUEUED  the waiter was not queued (its place expired, or it never got one) nor
                   handed the lock
]]
-- @include waiters
-- @include reply
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock = base .. 'lock'
  local value = ARGV[i]
  local wasFirst = head(base) == value
  local holder = redis.call('GET', lock)
  local handed = holder == value and redis.call('GET', waiterKey(base, value)) == 'handed'
  out[i] = redis.call('ZREM', base .. 'queue', value)
  redis.call('DEL', waiterKey(base, value))
  if wasFirst and holder == '|' or handed then
    -- Reserved for it, or handed to it and never used: then the next waiter gets the same token.
    if handed then
      out[i] = 1
      passOn(base, lock, redis.call('GET', base .. 'fence'), true)
    else
      passOn(base, lock)
    end
  end
end
return reply(out)
