--[[
  extend: compare-and-extend the lock of each resource; optionally re-establishes
  a lock whose key is gone (the node restarted empty, or the key expired on a
  fast node clock) as long as no later grant happened on this node.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `lock` and `fence`.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     '1' to re-establish missing keys
    ARGV[2]     fence retention, ms (at least every ttl): the fence key outlives the lock it guards
    for resource i: ARGV[3i] lease value, ARGV[3i+1] the lease's fencing token
                    (decimal string), ARGV[3i+2] ttl, ms
  Returns one code per resource, or the code alone when every resource's is the
  same (includes/reply.lua):
    1  EXTENDED        the key held our value; its expiry is now ttl (the fence's: the retention)
    2  REESTABLISHED   the key was gone and the fence not above our token: set again (and the fence)
    0  TAKEN           another value holds the lock
   -3  GONE            no key, and not re-established
]]
-- @include reply
local reestablish = ARGV[1] == '1'
local fenceRetention = ARGV[2]
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock, fence = base .. 'lock', base .. 'fence'
  local value, token, ttl = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  local holder = redis.call('GET', lock)
  if holder == value then
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', fence, fenceRetention)
    out[i] = 1
  elseif holder then
    out[i] = 0
  elseif reestablish and tonumber(redis.call('GET', fence) or '0') <= tonumber(token) then
    redis.call('SET', lock, value, 'PX', ttl)
    redis.call('SET', fence, token, 'PX', fenceRetention)
    out[i] = 2
  else
    out[i] = -3
  end
end
return reply(out)
