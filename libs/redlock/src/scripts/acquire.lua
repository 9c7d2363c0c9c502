--[[
  acquire: takes (or refreshes, when the value is already ours) the lock of each
  resource, records the proposed fencing token with it, and records the claim.
  Waiting (ARGV[3] above 0: the acquire will retry): a contender that finds the
  lock taken sets the waiter mark, so that the holder's release publishes, and,
  with a ticket, takes its place in the queue: members '<lease value>|<inbox>'
  (the channel its client listens on, ARGV[8]) ordered by ticket (the same
  ticket on every node, so every node orders them alike), each with a deadline
  on this node's clock that its attempts renew (a waiter that stopped retrying
  drops out). A release that finds waiters queued leaves the lock reserved ('|')
  until the head's deadline and tells the head on its inbox; only the head takes
  a free or reserved lock on a retry, and a first attempt that finds it reserved
  queues (QUEUED). A contender without a ticket (no fairness asked, revoking, or
  on its last attempt) takes a reserved lock as a free one.
  Revocation (ARGV[6]): the lock is taken from whoever holds it, in the same
  step, so no other holder can slip in between; the fence is raised as for any
  grant, so the revoked holder can neither extend nor re-establish. A claim
  granted to another value still wins: a late revoker cannot take the lease of
  the claim's winner.
  Not before (ARGV[7]): a grant waits for this node's own clock (TIME) to reach
  a wall time, whatever the client's clock says; with revocation, a client whose
  clock runs ahead can neither take a lock nor cancel its holder early.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts). The
  script appends the suffixes `lock`, `fence`, `waiters`, `queue`, `due` and
  `claim:<id>`, so every key of a resource shares its hash tag (one slot in a
  Redis Cluster). Common path: one SET NX GET for the lock and one SET GET for
  the fence (a read and a write each); the queue is touched only by waiters.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     ttl, ms
    ARGV[2]     claim retention, ms
    ARGV[3]     wait, ms: how long a waiter mark and a queue place last (0 = no retry follows: leave none)
    ARGV[4]     '1' on a retry of an acquire that queues: it may be queued already (a grant leaves the queue)
    ARGV[5]     fence retention, ms (at least the ttl)
    ARGV[6]     '1' to revoke: take the lock from another holder
    ARGV[7]     not before, ms since the epoch ('' = any time): grant only once this node's clock reads it
    ARGV[8]     inbox: the channel the client hears its turn on ('' = none: it waits for the retry delay)
    for resource i: ARGV[5i+4] lease value, ARGV[5i+5] proposed fencing token
                    (decimal string), ARGV[5i+6] claim id ('' = no claim), ARGV[5i+7]
                    '1' if the value is new (made up by the client): a lock already holding it
                    was set by a takeover by that value (a recovery by the claim's holder) and
                    is theirs, never refreshed (TAKEN); '0' a value supplied by the caller;
                    ARGV[5i+8] queue ticket ('' = this attempt does not queue)
  Returns an array, one entry per resource: the code, or for STALE and CLAIMED
  a pair {code, detail}
    1  ACQUIRED  the lock is ours, set by this call (it was free, reserved, or
                 revoked): its fence is the proposal; claim recorded
    2  REFRESHED the lock already held our value (a takeover by value): refreshed,
                 its fence the proposal, claim recorded; a failed attempt must not
                 release it (it may be the value's owner's lease)
    0  TAKEN     another value holds the lock (a waiter mark is left)
   -1  CLAIMED   the claim is recorded for another value; detail: that value (so
                 the client can tell one winner holding a majority from a split
                 among contenders)
   -2  STALE     the proposal is not above the stored fence (nothing changed);
                 detail: the stored fence (decimal string)
   -4  QUEUED    the lock is free or reserved, and another waiter is first in the queue
   -5  EARLY     this node's clock has not reached the not-before time (nothing changed)
]]
local ttl = ARGV[1]
local retention = ARGV[2]
local wait = tonumber(ARGV[3])
local mayBeQueued = ARGV[4] == '1'
local fenceRetention = ARGV[5]
local revoke = ARGV[6] == '1'
local notBefore = tonumber(ARGV[7])
local inbox = ARGV[8]
-- @include waiters
local early = notBefore and now() < notBefore
-- The queue's keys are named only on a waiter's path: the common path builds no more strings than it needs.
-- Takes (or keeps, by ticket) a place in the queue until the wait is over.
local function enqueue(base, member, ticket)
  local queue, due = base .. 'queue', base .. 'due'
  redis.call('ZADD', queue, 'NX', ticket, member)
  redis.call('ZADD', due, now() + wait, member)
  redis.call('PEXPIRE', queue, wait)
  redis.call('PEXPIRE', due, wait)
end
local function dequeue(base, member)
  redis.call('ZREM', base .. 'queue', member)
  redis.call('ZREM', base .. 'due', member)
end
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock = base .. 'lock'
  local value, proposal, claimId = ARGV[5 * i + 4], ARGV[5 * i + 5], ARGV[5 * i + 6]
  local new, ticket = ARGV[5 * i + 7] == '1', ARGV[5 * i + 8]
  local member = (ticket ~= '' or mayBeQueued) and value .. '|' .. inbox
  local claim = claimId ~= '' and base .. 'claim:' .. claimId
  local code, holder, setFree
  local claimHolder = claim and redis.call('GET', claim)
  if claimHolder and claimHolder ~= value then
    code = { -1, claimHolder }
  elseif early then
    code = -5
  else
    if mayBeQueued and ticket ~= '' then
      holder = redis.call('GET', lock)
    else
      -- Sets the lock when free (setFree); returns the value it holds otherwise.
      holder = redis.call('SET', lock, value, 'NX', 'PX', ttl, 'GET')
      setFree = not holder
    end
    if holder == '|' or not (holder or setFree) then
      -- Free (a retry that may be queued only read it) or reserved: the queue's head takes it.
      if ticket ~= '' then
        local first, deadline = head(base)
        if first and first ~= member then
          enqueue(base, member, ticket)
          redis.call('SET', base .. 'waiters', '1', 'PX', wait)
          if not holder then
            redis.call('SET', lock, '|', 'PXAT', deadline)
          end
          code = -4
        end
      end
    elseif holder and (holder == value and new or holder ~= value and not revoke) then
      code = 0
      if wait > 0 then
        redis.call('SET', base .. 'waiters', '1', 'PX', wait)
        if ticket ~= '' then
          enqueue(base, member, ticket)
        end
      end
    end
  end
  if mayBeQueued and code and wait == 0 then
    -- The last attempt failed: no retry renews its place, which must not hold a reservation.
    dequeue(base, member)
  elseif not code then
    -- The lock is ours to take (free, reserved, held by our value, or revoked): the proposal must be above the stored fence.
    local fence = base .. 'fence'
    local stored = redis.call('SET', fence, proposal, 'PX', fenceRetention, 'GET')
    if stored and tonumber(proposal) <= tonumber(stored) then
      redis.call('SET', fence, stored, 'PX', fenceRetention)
      if setFree then
        redis.call('DEL', lock)
      end
      code = { -2, stored }
    else
      if not setFree then
        redis.call('SET', lock, value, 'PX', ttl)
      end
      if mayBeQueued or holder == '|' then
        dequeue(base, member or value .. '|' .. inbox)
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
