--[[
  acquire: takes (or refreshes, when the value is already ours) the lock of each
  resource, records the proposed fencing token with it, and records the claim.
  Waiting (ARGV[3] above 0: the acquire will retry): a contender that finds the
  lock taken sets the waiter mark, so that the holder's release publishes, and,
  with a ticket, takes its place in the queue: its lease value, ordered by
  ticket (the same ticket on every node, so every node orders them alike), and
  its record (waiters.lua): its inbox (the channel its client listens on,
  ARGV[4]), and its ttl and fence retention for a waiter the lock may be handed
  to (a value of its own, no claim, start or not-before, an inbox), until a
  deadline on this node's clock that its attempts renew (a waiter that stopped
  retrying drops out). A lease's release that finds waiters queued hands the
  lock to the head when it may and hears its inbox (waiters.lua), else leaves
  the lock reserved ('|') until the head's deadline and tells the head on its
  inbox; only the head takes a free or reserved lock on a retry, a retry that
  finds the lock handed to it takes it as it is (HANDED), and a first attempt
  that finds it reserved queues (QUEUED). A contender without a ticket (no
  fairness asked, revoking, or on its last attempt) takes a reserved lock as a
  free one.
  Revocation (ARGV[6]): the lock is taken from whoever holds it, in the same
  step, so no other holder can slip in between; the fence is raised as for any
  grant, so the revoked holder can neither extend nor re-establish. A claim
  granted to another value still wins: a late revoker cannot take the lease of
  the claim's winner.
  Start (a worker's first start of a tick: the claim's value takes the lock,
  free or already its own, and starts the claim): the claim first moves to
  '<value>|<start id>' as start.lua moves it (includes/claimstart.lua), so that
  a start and its lease are one call; a claim that another value or another
  start holds is refused (CLAIMED) and the lock left alone, so a second
  publication of the claim's work cannot raise the fence of the first one's
  lease. The claim stays started only where the lock is granted: a start refused
  on this node (TAKEN, PASSED, BEHIND, STALE; EARLY changes nothing at all) puts
  the claim back as it found it.
  Not before (ARGV[8]): a grant waits for this node's own clock (TIME) to reach
  a wall time, whatever the client's clock says; with revocation, a client whose
  clock runs ahead can neither take a lock nor cancel its holder early.
  Fence limit: the proposal is the caller's (a tick's slot of tokens);
  a node whose fence reached the limit answers PASSED, whether the lock is free
  or taken there: a later tick's run was granted first.
  After (`after`, an earlier claim of the resource, for the scheduler the
  tick before): a grant waits while the earlier claim is granted here but not
  started (its start was not granted here, or a failed attempt's cleanup put it
  back), and this node's clock is before `after until`: BEHIND, nothing changed.
  A node whose fence before this grant reached `after fence` (the earlier
  claim's first token) granted a run of that slot or a later one: it waits no
  more and reads no claim (the common case: the tick before ran).
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts). The
  script appends the suffixes `lock`, `fence`, `waiters`, `queue`,
  `waiter:<value>` and `claim:<id>`, so every key of a resource shares its hash
  tag (one slot in a Redis Cluster). Common path: one SET NX GET for the lock and one SET GET for
  the fence (a read and a write each), and with a claim one SET NX GET for it
  (written before the lock is known: an attempt that fails deletes the claim it
  set, in the same step); the queue is touched only by waiters.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV, in one of two layouts: a plain call (no claim, every value new, none of the
  options ARGV[6..8] nor the per-resource ones past the third) sends a header of four
  and three arguments per resource; any other call a header of h = #ARGV - 10 * #KEYS
  entries (five to eight: the options left out past the last one set) and ten per
  resource:
    ARGV[1]     ttl, ms
    ARGV[2]     wait, ms: how long a waiter mark and a queue place last (0 = no retry follows: leave none)
    ARGV[3]     fence retention, ms (at least the ttl)
    ARGV[4]     inbox: the channel the client hears its turn on ('' = none: it waits for the retry delay)
    ARGV[5]     claim retention, ms
    ARGV[6]     '1' on a retry of an acquire that queues: it may be queued already (a grant
                leaves the queue); default '0'
    ARGV[7]     '1' to revoke: take the lock from another holder; default '0'
    ARGV[8]     not before, ms since the epoch; default '' (any time): grant only once this
                node's clock reads it
    for resource i, from ARGV[h+1]: lease value, proposed fencing token (decimal digits,
                    no leading zeros), queue ticket ('' = this attempt does not queue); then,
                    but for a plain call: claim id ('' = no claim), and '1' if the value is
                    new (made up by the client): a lock already holding it was set by a
                    takeover by that value (a recovery by the claim's holder) and is theirs,
                    never refreshed (TAKEN); '0' a value supplied by the caller (a plain
                    call's values are all new); then the start id ('' = none: no start;
                    with one, the claim id is set and the value supplied); the fence limit
                    ('' = none; decimal digits: the proposal stays below it); the earlier
                    claim id ('' = none), until when it is waited for, ms since the
                    epoch, and its first fencing token ('' = none; decimal digits)
  Returns one entry per resource, or the code alone when every resource's is the
  same code (includes/reply.lua; a call for one resource returns its entry
  alone): the code, or for STALE, CLAIMED and HANDED a pair {code, detail}
    1  ACQUIRED  the lock is ours, set by this call (it was free, reserved, or
                 revoked): its fence is the proposal; claim recorded; for a start,
                 or a grant that revoked another holder, {1, the fence before ('' for
                 none), then, if revoked, the ms the holder's lock had left}
    2  REFRESHED the lock already held our value (a takeover by value): refreshed,
                 its fence the proposal, claim recorded; a failed attempt must not
                 release it (it may be the value's owner's lease)
    0  TAKEN     another value holds the lock (a waiter mark is left)
   -1  CLAIMED   the claim is recorded for another value (with a start: for
                 another value or another start); detail: that value (so the
                 client can tell one winner holding a majority from a split
                 among contenders)
   -2  STALE     the proposal is not above the stored fence (nothing changed);
                 detail: the stored fence (decimal string)
   -4  QUEUED    the lock is free or reserved, and another waiter is first in the queue
   -5  EARLY     this node's clock has not reached the not-before time (nothing changed)
   -6  BEHIND    an earlier claim is granted here and not started (see After; nothing changed)
   -7  PASSED    {-7, fence}: the stored fence reached the fence limit (nothing changed)
    3  HANDED    a release handed the lock to this value (its record says `handed`):
                 refreshed for the ttl from now, fence unchanged; detail: that fence
]]
-- Whether token a is below token b. Tokens are decimal integers without leading zeros (see
-- #nextProposal): the longer is the greater and equal lengths compare as strings (tonumber on 16
-- digits costs the node more than this whole step).
local function below(a, b)
  return #a < #b or #a == #b and a < b
end
-- Stores the proposal as the resource's fence when it is above the stored one, returning nil and
-- the token stored before (nil: none); else puts the stored one back and returns it (STALE).
local function raiseFence(fence, proposal, retention)
  local stored = redis.call('SET', fence, proposal, 'PX', retention, 'GET')
  if stored and not below(stored, proposal) then
    redis.call('SET', fence, stored, 'PX', retention)
    return stored
  end
  return nil, stored
end
-- The common case first, whole: one resource, a plain call (4 + 3 arguments), the lock free. Short
-- and on top, so that it runs without stepping through the rest of the script, which a node whose
-- caches other processes keep cold pays for well beyond its few instructions (BENCHMARK.md). A lock
-- found taken goes on below with the holder read here (`taken`).
local taken
if #KEYS == 1 and #ARGV == 7 then
  local base = KEYS[1]
  taken = redis.call('SET', base .. 'lock', ARGV[5], 'NX', 'PX', ARGV[1], 'GET')
  if not taken then
    local stale = raiseFence(base .. 'fence', ARGV[6], ARGV[3])
    if not stale then
      return 1
    end
    redis.call('DEL', base .. 'lock')
    return { -2, stale }
  end
end
-- A plain call has 4 + 3 * #KEYS arguments; the other layout cannot (its header would be shorter than five).
local plain = #ARGV == 4 + 3 * #KEYS
local stride = plain and 3 or 10
local h = #ARGV - stride * #KEYS
local ttl = ARGV[1]
local wait = tonumber(ARGV[2])
local fenceRetention = ARGV[3]
local inbox = ARGV[4]
local retention = not plain and ARGV[5]
-- Options the call left out take their defaults (past the header, ARGV holds the resources' arguments).
local mayBeQueued = h >= 6 and ARGV[6] == '1'
local revoke = h >= 7 and ARGV[7] == '1'
local notBefore = h >= 8 and tonumber(ARGV[8])
-- @include waiters
-- @include claimstart
-- @include reply
local early = notBefore and now() < notBefore
-- Whether a resource's code is a grant (ACQUIRED, a start's {1, before}, or REFRESHED).
local function granted(code)
  return code == 1 or code == 2 or type(code) == 'table' and code[1] == 1
end
-- Whether a grant waits for the earlier claim `after` (see After): it is granted here but not
-- started ('|': a start leaves its claim started only where its lease was granted), and this
-- node's clock is before `untilMs`.
local function behind(base, after, untilMs)
  local earlier = redis.call('GET', base .. 'claim:' .. after)
  return earlier ~= false and not string.find(earlier, '|', 1, true) and now() < tonumber(untilMs)
end
-- Whether the fence stored before this grant (`before`, false or nil for none) reached the earlier
-- claim's first token (`from`, '' for none): a run of its slot or a later one was granted here, so
-- the earlier claim started here or can no longer come first; no claim needs reading.
local function slotReached(before, from)
  return before and from ~= '' and not below(before, from)
end
-- One resource: its entry alone (see Returns), without building the array.
local out = #KEYS ~= 1 and {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock = base .. 'lock'
  local at = h + stride * (i - 1)
  local value, proposal, ticket = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local claimId, new, start, limit, after = '', true, '', '', ''
  if not plain then
    claimId, new, start = ARGV[at + 4], ARGV[at + 5] == '1', ARGV[at + 6]
    limit, after = ARGV[at + 7], ARGV[at + 8]
  end
  local claim = claimId ~= '' and base .. 'claim:' .. claimId
  local startedKey = start ~= '' and claim
  -- A waiter the lock may be handed to (waiters.lua): a value of its own, no claim, start,
  -- not-before or fence limit (a handoff carries the releaser's fence on, whatever the limit), and an inbox.
  local handoff = new and not claim and start == '' and not notBefore and limit == '' and inbox ~= ''
  local code, holder, setFree, claimSet, handed, claimWas
  if start ~= '' and early then
    code = -5
  elseif start ~= '' then
    code, claimWas = startClaim(claim, value, start, '', retention, '')
    -- Started: a grant must not write the claim back to the bare value.
    claim = false
  elseif claim then
    -- Recorded first (most contests find it free and win): an attempt that fails below takes it back.
    local claimHolder = redis.call('SET', claim, value, 'NX', 'PX', retention, 'GET')
    claimSet = not claimHolder
    if claimHolder and claimHolder ~= value then
      code = { -1, claimHolder }
    end
  end
  if not code and early then
    code = -5
  elseif not code then
    if mayBeQueued and ticket ~= '' then
      holder = redis.call('GET', lock)
    else
      -- Sets the lock when free (setFree); returns the value it holds otherwise (read above already: `taken`).
      holder = taken or redis.call('SET', lock, value, 'NX', 'PX', ttl, 'GET')
      setFree = not holder
    end
    if holder == '|' or not (holder or setFree) then
      -- Free (a retry that may be queued only read it) or reserved: the queue's head takes it.
      if ticket ~= '' then
        local first = head(base)
        if first and first ~= value then
          enqueue(base, value, record(inbox, handoff and ttl, fenceRetention), ticket, wait)
          redis.call('SET', base .. 'waiters', '1', 'PX', wait)
          if not holder then
            redis.call('SET', lock, '|', 'PX', remaining(base, first))
          end
          code = -4
        end
      end
    elseif holder == value and new and redis.call('GET', waiterKey(base, value)) == 'handed' then
      -- Handed to this waiter by a release (its notification may be late or lost): ours, with the
      -- fence the release set, refreshed from now.
      redis.call('SET', lock, value, 'PX', ttl)
      redis.call('SET', waiterKey(base, value), 'handed', 'PX', ttl)
      code = { 3, redis.call('GET', base .. 'fence') }
      handed = true
    elseif holder and (holder == value and new or holder ~= value and not revoke) then
      code = 0
      if wait > 0 then
        redis.call('SET', base .. 'waiters', '1', 'PX', wait)
        if ticket ~= '' then
          enqueue(base, value, record(inbox, handoff and ttl, fenceRetention), ticket, wait)
        end
      end
    end
  end
  if code == 0 and limit ~= '' then
    -- Taken by a run of a later tick (its fence reached the limit) is not taken by an earlier one.
    local stored = redis.call('GET', base .. 'fence')
    if stored and not below(stored, limit) then
      code = { -7, stored }
    end
  end
  if mayBeQueued and code and wait == 0 and not handed then
    -- The last attempt failed: no retry renews its place, which must not hold a reservation.
    dequeue(base, value)
  elseif not code then
    -- The lock is ours to take (free, reserved, held by our value, or revoked): the proposal must be above the stored fence.
    local stale, before = raiseFence(base .. 'fence', proposal, fenceRetention)
    if stale then
      if setFree then
        redis.call('DEL', lock)
      end
      code = { (limit ~= '' and not below(stale, limit)) and -7 or -2, stale }
    elseif after ~= '' and not slotReached(before, ARGV[at + 10]) and behind(base, after, ARGV[at + 9]) then
      -- Back as it was: the fence, and the lock if this call set it (the claim below).
      if before then
        redis.call('SET', base .. 'fence', before, 'PX', fenceRetention)
      else
        redis.call('DEL', base .. 'fence')
      end
      if setFree then
        redis.call('DEL', lock)
      end
      code = -6
    else
      -- Revoked from a live holder: how long its lease had left here (it may run until then).
      local revokedMs = revoke and holder and holder ~= value and holder ~= '|' and redis.call('PTTL', lock)
      if not setFree then
        redis.call('SET', lock, value, 'PX', ttl)
      end
      if mayBeQueued or holder == '|' then
        dequeue(base, value)
      end
      if claim and not claimSet then
        redis.call('SET', claim, value, 'PX', retention)
      end
      if holder == value then
        -- A takeover by value: a release of a handoff it took over, with the older fence, must
        -- not find the lock marked handed to the value (release.lua) and delete the takeover's.
        redis.call('DEL', waiterKey(base, value))
      end
      code = holder == value and 2 or 1
      if code == 1 and (start ~= '' or revokedMs) then
        -- A start's grant names the fence before it: a failed attempt's cleanup puts it back.
        code = { 1, before or '', revokedMs or nil }
      end
    end
  end
  if claimSet and not granted(code) then
    redis.call('DEL', claim)
  end
  -- A start's claim stays started only where its lease was granted: a start refused here (taken,
  -- passed, behind, stale) leaves the claim as it found it, so a later claim waits for this one
  -- here (see After) and a retry starts it afresh.
  if claimWas ~= nil and not granted(code) then
    if claimWas == value then
      redis.call('SET', startedKey, value, 'KEEPTTL')
    elseif claimWas == false then
      redis.call('DEL', startedKey)
    end
  end
  if not out then
    return code
  end
  out[i] = code
end
return reply(out)
