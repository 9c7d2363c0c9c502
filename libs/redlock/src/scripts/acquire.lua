--[[
  acquire: takes (or refreshes, when the value is already ours) the lock of each
  resource, records the proposed fencing token with it, and records the claim.
  Fairness: a contender that found the lock taken leaves a short-lived waiter
  mark; while it is there, a first attempt yields (QUEUED) instead of taking a
  free lock, so a client that just released cannot starve those waiting.
  Revocation (ARGV[6]): the lock is taken from whoever holds it, in the same
  step, so no other holder can slip in between; the fence is raised as for any
  grant, so the revoked holder can neither extend nor re-establish. A claim
  granted to another value still wins: a late revoker cannot take the lease of
  the claim's winner.
  Not before (ARGV[7]): a grant waits for this node's own clock (TIME) to reach
  a wall time, whatever the client's clock says; with revocation, a client whose
  clock runs ahead can neither take a lock nor cancel its holder early.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts). The
  script appends the suffixes `lock`, `fence`, `waiters` and `claim:<id>`, so
  every key of a resource shares its hash tag (one slot in a Redis Cluster).
  Common path: one SET NX GET for the lock, one SET GET for the fence (a read
  and a write each), plus one EXISTS on first attempts that yield.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     ttl, ms
    ARGV[2]     claim retention, ms
    ARGV[3]     waiter mark, ms: left when the lock is taken (0 = leave none: no retry follows)
    ARGV[4]     '1' if this is the first attempt of an acquire that will retry: it yields to a waiter mark
    ARGV[5]     fence retention, ms (at least the ttl)
    ARGV[6]     '1' to revoke: take the lock from another holder (no waiter marks, no yielding)
    ARGV[7]     not before, ms since the epoch ('' = any time): grant only once this node's clock reads it
    for resource i: ARGV[4i+4] lease value, ARGV[4i+5] proposed fencing token
                    (decimal string), ARGV[4i+6] claim id ('' = no claim), ARGV[4i+7]
                    '1' if the value is new (made up by the client): a lock already holding it
                    was set by a takeover by that value (a recovery by the claim's holder) and
                    is theirs, never refreshed (TAKEN); '0' a value supplied by the caller
  Returns an array, one entry per resource: the code, or for STALE and CLAIMED
  a pair {code, detail}
    1  ACQUIRED  the lock is ours, set by this call (it was free, or revoked): its
                 fence is the proposal; claim recorded (a waiter mark is left to
                 expire: other waiters keep their turn)
    2  REFRESHED the lock already held our value (a takeover by value): refreshed,
                 its fence the proposal, claim recorded; a failed attempt must not
                 release it (it may be the value's owner's lease)
    0  TAKEN     another value holds the lock (a waiter mark is left)
   -1  CLAIMED   the claim is recorded for another value; detail: that value (so
                 the client can tell one winner holding a majority from a split
                 among contenders)
   -2  STALE     the proposal is not above the stored fence (nothing changed);
                 detail: the stored fence (decimal string)
   -4  QUEUED    the lock is free but others are waiting and this is a first attempt
   -5  EARLY     this node's clock has not reached the not-before time (nothing changed)
]]
local ttl = ARGV[1]
local retention = ARGV[2]
local waiterMark = tonumber(ARGV[3])
local firstAttempt = ARGV[4] == '1'
local fenceRetention = ARGV[5]
local revoke = ARGV[6] == '1'
local notBefore = tonumber(ARGV[7])
local early = false
if notBefore then
  local time = redis.call('TIME')
  early = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) < notBefore
end
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock, waiters = base .. 'lock', base .. 'waiters'
  local value, proposal, claimId, new = ARGV[4 * i + 4], ARGV[4 * i + 5], ARGV[4 * i + 6], ARGV[4 * i + 7] == '1'
  local claim = claimId ~= '' and base .. 'claim:' .. claimId
  local code, holder
  local claimHolder = claim and redis.call('GET', claim)
  if claimHolder and claimHolder ~= value then
    code = { -1, claimHolder }
  elseif early then
    code = -5
  elseif firstAttempt and not revoke and redis.call('EXISTS', waiters) == 1 then
    holder = redis.call('GET', lock)
    if not holder then
      code = -4
    elseif holder ~= value or new then
      code = 0
    end
  else
    -- Sets the lock when free; returns the value it holds otherwise (false when it was free).
    holder = redis.call('SET', lock, value, 'NX', 'PX', ttl, 'GET')
    if holder and (holder == value and new or holder ~= value and not revoke) then
      code = 0
    end
  end
  if code == 0 then
    if waiterMark > 0 then
      redis.call('SET', waiters, '1', 'PX', waiterMark)
    end
  elseif not code then
    -- The lock is set (or held by our value, or by one we revoke): the proposal must be above the stored fence.
    local fence = base .. 'fence'
    local stored = redis.call('SET', fence, proposal, 'PX', fenceRetention, 'GET')
    if stored and tonumber(proposal) <= tonumber(stored) then
      redis.call('SET', fence, stored, 'PX', fenceRetention)
      if not holder then
        redis.call('DEL', lock)
      end
      code = { -2, stored }
    else
      if holder then
        redis.call('SET', lock, value, 'PX', ttl)
      end
      if claim then
        redis.call('SET', claim, value, 'PX', retention)
      end
      code = holder == value and 2 or 1
    end
  end
  out[i] = code
end
return out
