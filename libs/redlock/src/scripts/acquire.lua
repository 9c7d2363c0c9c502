--[[
  acquire: takes (or refreshes, when the value is already ours) the lock of each
  resource, records the proposed fencing token with it, and records the claim.
  Fairness: a contender that found the lock taken leaves a short-lived waiter
  mark; while it is there, a first attempt yields (QUEUED) instead of taking a
  free lock, so a client that just released cannot starve those waiting.
  Variable key count: 4 keys per resource, all under the resource's hash tag.

  KEYS, for resource i = 1..n:
    KEYS[4i-3]  lock key    (value = lease value, PX = ttl)
    KEYS[4i-2]  fence key   (highest fencing token granted on this node; PX = fence retention)
    KEYS[4i-1]  claim key   (lease value that won the claim, PX = claim retention)
    KEYS[4i]    waiter key  (someone is retrying; PX = waiter mark)
  ARGV:
    ARGV[1]     ttl, ms
    ARGV[2]     claim retention, ms
    ARGV[3]     waiter mark, ms: left when the lock is taken (0 = leave none: no retry follows)
    ARGV[4]     '1' if this is the first attempt of an acquire that will retry: it yields to a waiter mark
    ARGV[5]     fence retention, ms (at least the ttl)
    for resource i: ARGV[3i+3] lease value, ARGV[3i+4] proposed fencing token
                    (decimal string), ARGV[3i+5] '1' to check and record the claim
  Returns a flat array, two entries per resource: code, then the fence (decimal
  string after the call; '0' when not read: TAKEN, QUEUED) - or, for CLAIMED, the
  lease value the claim is recorded for (so the client can tell one winner holding
  a majority from a split among contenders)
    1  ACQUIRED  the lock is ours (new, or refreshed because it held our value);
                 fence = proposal; claim recorded (a waiter mark is left to expire:
                 other waiters keep their turn)
    0  TAKEN     another value holds the lock (a waiter mark is left)
   -1  CLAIMED   the claim is recorded for another value
   -2  STALE     the proposal is not above the stored fence
   -4  QUEUED    the lock is free but others are waiting and this is a first attempt
]]
local ttl = ARGV[1]
local retention = ARGV[2]
local waiterMark = tonumber(ARGV[3])
local firstAttempt = ARGV[4] == '1'
local fenceRetention = ARGV[5]
local out = {}
for i = 1, #KEYS / 4 do
  local lock, fence, claim, waiters = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  local value, proposal, withClaim = ARGV[3 * i + 3], ARGV[3 * i + 4], ARGV[3 * i + 5] == '1'
  local holder = redis.call('GET', lock)
  local code
  local current
  local claimHolder = withClaim and redis.call('GET', claim)
  if claimHolder and claimHolder ~= value then
    code = -1
    current = claimHolder
  elseif holder and holder ~= value then
    code = 0
    if waiterMark > 0 then
      redis.call('SET', waiters, '1', 'PX', waiterMark)
    end
  elseif not holder and firstAttempt and redis.call('EXISTS', waiters) == 1 then
    code = -4
  else
    current = redis.call('GET', fence) or '0'
    if tonumber(proposal) <= tonumber(current) then
      code = -2
    else
      redis.call('SET', lock, value, 'PX', ttl)
      redis.call('SET', fence, proposal, 'PX', fenceRetention)
      if withClaim then
        redis.call('SET', claim, value, 'PX', retention)
      end
      current = proposal
      code = 1
    end
  end
  out[2 * i - 1] = code
  out[2 * i] = current or '0'
end
return out
