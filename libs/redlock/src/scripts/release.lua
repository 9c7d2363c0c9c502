--[[
  release: compare-and-delete the lock of each resource; optionally also drops
  a claim recorded by the same value (only after a failed acquire attempt: a
  granted claim must outlive the lease). Fences are never deleted.
  Variable key count: 2 keys per resource, under the resource's hash tag.

  KEYS, for resource i = 1..n:
    KEYS[2i-1]  lock key
    KEYS[2i]    claim key
  ARGV:
    ARGV[1]     '1' to drop claims recorded by the value too
    for resource i: ARGV[i+1] lease value
  Returns an array, one code per resource:
    1  RELEASED     the key held our value and is deleted
    0  NOT_HELD     the key is gone or holds another value
]]
local dropClaims = ARGV[1] == '1'
local out = {}
for i = 1, #KEYS / 2 do
  local lock, claim = KEYS[2 * i - 1], KEYS[2 * i]
  local value = ARGV[i + 1]
  if redis.call('GET', lock) == value then
    redis.call('DEL', lock)
    out[i] = 1
  else
    out[i] = 0
  end
  if dropClaims and redis.call('GET', claim) == value then
    redis.call('DEL', claim)
  end
end
return out
