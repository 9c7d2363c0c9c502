--[[
  extend: compare-and-extend the lock of each resource; optionally re-establishes
  a lock whose key is gone (the node restarted empty, or the key expired on a
  fast node clock) as long as no later grant happened on this node.
  Variable key count: 2 keys per resource, under the resource's hash tag.

  KEYS, for resource i = 1..n:
    KEYS[2i-1]  lock key
    KEYS[2i]    fence key
  ARGV:
    ARGV[1]     ttl, ms
    ARGV[2]     '1' to re-establish missing keys
    ARGV[3]     fence retention, ms (at least the ttl): the fence key outlives the lock it guards
    for resource i: ARGV[2i+2] lease value, ARGV[2i+3] the lease's fencing token (decimal string)
  Returns an array, one code per resource:
    1  EXTENDED        the key held our value; its expiry is now ttl (the fence's: the retention)
    2  REESTABLISHED   the key was gone and the fence not above our token: set again (and the fence)
    0  TAKEN           another value holds the lock
   -3  GONE            no key, and not re-established
]]
local ttl = ARGV[1]
local reestablish = ARGV[2] == '1'
local fenceRetention = ARGV[3]
local out = {}
for i = 1, #KEYS / 2 do
  local lock, fence = KEYS[2 * i - 1], KEYS[2 * i]
  local value, token = ARGV[2 * i + 2], ARGV[2 * i + 3]
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
return out
