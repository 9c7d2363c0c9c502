--[[
  revoke: takes a resource's lock away from whoever holds it (overlap
  cancel-previous). Deletes the lock and raises the fence to the proposal, so
  the revoked holder can neither extend nor re-establish (its token is now
  below the fence) and its watchdog aborts it.
  A revocation made on behalf of a claim is skipped once that claim is granted
  on the node: a late revoker must not take the lease of the claim's winner.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `lock`, `fence` and `claim:<id>`.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     fence retention, ms
    for resource i: ARGV[2i] proposed fencing token (decimal string),
                    ARGV[2i+1] claim id the revocation is for ('' = none)
  Returns an array, one code per resource:
    1  REVOKED   a lock was there and is deleted
    0  FREE      there was no lock (the fence is raised all the same)
    2  CLAIMED   the claim is already granted here: nothing done
]]
local fenceRetention = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock, fence = base .. 'lock', base .. 'fence'
  local proposal, claimId = ARGV[2 * i], ARGV[2 * i + 1]
  if claimId ~= '' and redis.call('EXISTS', base .. 'claim:' .. claimId) == 1 then
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
