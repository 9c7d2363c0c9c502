--[[
  revoke: takes a resource's lock away from whoever holds it (overlap
  cancel-previous). Deletes the lock and raises the fence to the proposal, so
  the revoked holder can neither extend nor re-establish (its token is now
  below the fence) and its watchdog aborts it.
  A revocation made on behalf of a claim is skipped once that claim is granted
  on the node: a late revoker must not take the lease of the claim's winner.
  Variable key count: 3 keys per resource, under the resource's hash tag.

  KEYS, for resource i = 1..n:
    KEYS[3i-2]  lock key
    KEYS[3i-1]  fence key
    KEYS[3i]    claim key (of the claim the revocation is for; may not exist)
  ARGV:
    ARGV[1]     fence retention, ms
    for resource i: ARGV[i+1] proposed fencing token (decimal string)
  Returns an array, one code per resource:
    1  REVOKED   a lock was there and is deleted
    0  FREE      there was no lock (the fence is raised all the same)
    2  CLAIMED   the claim is already granted here: nothing done
]]
local fenceRetention = ARGV[1]
local out = {}
for i = 1, #KEYS / 3 do
  local lock, fence, claim = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local proposal = ARGV[i + 1]
  if redis.call('EXISTS', claim) == 1 then
    out[i] = 2
  else
    out[i] = redis.call('DEL', lock)
    if tonumber(proposal) > tonumber(redis.call('GET', fence) or '0') then
      redis.call('SET', fence, proposal, 'PX', fenceRetention)
    else
      redis.call('INCR', fence)
      redis.call('PEXPIRE', fence, fenceRetention)
    end
  end
end
return out
