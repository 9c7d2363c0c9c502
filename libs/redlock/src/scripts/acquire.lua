--[[
  acquire: takes (or refreshes, when the value is already ours) the lock of each
  resource, records the proposed fencing token with it, and records the claim.
  Variable key count: 3 keys per resource, all under the resource's hash tag.

  KEYS, for resource i = 1..n:
    KEYS[3i-2]  lock key   (value = lease value, PX = ttl)
    KEYS[3i-1]  fence key  (highest fencing token granted on this node; no expiry)
    KEYS[3i]    claim key  (lease value that won the claim, PX = claim retention)
  ARGV:
    ARGV[1]     ttl, ms
    ARGV[2]     claim retention, ms
    for resource i: ARGV[3i] lease value, ARGV[3i+1] proposed fencing token
                    (decimal string), ARGV[3i+2] '1' to check and record the claim
  Returns a flat array, two entries per resource: code, fence (decimal string, after the call)
    1  ACQUIRED  the lock is ours (new, or refreshed because it held our value);
                 fence = proposal; claim recorded
    0  TAKEN     another value holds the lock
   -1  CLAIMED   the claim is recorded for another value
   -2  STALE     the proposal is not above the stored fence
  Only ACQUIRED writes anything.
]]
local ttl = ARGV[1]
local retention = ARGV[2]
local out = {}
for i = 1, #KEYS / 3 do
  local lock, fence, claim = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local value, proposal, withClaim = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2] == '1'
  local current = redis.call('GET', fence) or '0'
  local holder = redis.call('GET', lock)
  local code
  if withClaim and (redis.call('GET', claim) or value) ~= value then
    code = -1
  elseif holder and holder ~= value then
    code = 0
  elseif tonumber(proposal) <= tonumber(current) then
    code = -2
  else
    redis.call('SET', lock, value, 'PX', ttl)
    redis.call('SET', fence, proposal)
    if withClaim then
      redis.call('SET', claim, value, 'PX', retention)
    end
    current = proposal
    code = 1
  end
  out[2 * i - 1] = code
  out[2 * i] = current
end
return out
