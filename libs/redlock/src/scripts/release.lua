--[[
  release: compare-and-delete the lock of each resource; optionally also drops
  a claim recorded by the same value (only after a failed acquire attempt: a
  granted claim must outlive the lease). Fences are never deleted.
  Waiters (a waiter mark: acquire.lua): a lease's release (with its fence)
  hands the lock to the first waiter of the queue, with the lease's token + 1,
  when the waiter asked for it and hears its inbox; else the lock stays
  reserved ('|') for it until its deadline, and its lease value is published on
  its inbox (the channel named in its queue member) (waiters.lua, serveFirst).
  A release that frees or reserves the lock is also published ('') on the
  resource's channel, for waiters that do not queue.
  A lease released where the lock is not its own may still be queued there: its
  last attempt found the lock taken on this node (the previous holder's release
  had not landed yet) while it won on a quorum of others. Its release takes
  those places out and passes on a reservation made for it since, as leave.lua
  does: else the lock would stay reserved for a waiter that is done until its
  deadline. A failed attempt cleaning up keeps them: its acquire retries and
  needs its place.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `lock`, `fence`, `waiters`, `queue`, `waiter:<value>`,
  `released` (the resource's channel) and `claim:<id>`.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV: one lease value per resource (a plain release: no claims dropped, no fence
  checked), or ARGV[1] and three per resource:
    ARGV[1]     what releases: '0' a lease (as a plain release does); '1' a failed
                attempt cleaning up, dropping the claims the value recorded too
                (with a fence: only while it is current); '2' a failed attempt
                cleaning up, claims kept (a takeover's: they may be its owner's), but
                a failed start's claim, named `<claim id>|<start id>[|<fence>]`, is
                put back from `<value>|<start id>` to `<value>`, and the fence to the
                one given (the one before the grant; '' for none), while the fence
                is current;
                '3' an acquire that failed giving back a handoff it never used
                (claims kept): the next waiter is handed the same token
    for resource i: ARGV[3i-1] lease value, ARGV[3i] claim id ('' = none),
                    ARGV[3i+1] fence ('' = any): with one, the lock is deleted
                    only while the resource's fence is still that - nobody was
                    granted since (a failed attempt cleaning up: another holder
                    of the same value, a takeover, may have refreshed it since)
                    or while the value's record says `handed` (waiters.lua)
  Returns one code per resource, or the code alone when every resource's is the
  same (includes/reply.lua):
    1  RELEASED     the key held our value, or was reserved for it, and is deleted (or
                    reserved for the first waiter)
    0  NOT_HELD     the key is gone or holds another value
]]
-- The common case first, whole: a lease's release (ARGV[1] '0', one resource) where the lock holds
-- its value and fence and nobody waits. Short and on top, as in acquire.lua; any other case goes on
-- below with what was read here (`first`).
local first
if #KEYS == 1 and #ARGV == 4 and ARGV[1] == '0' then
  local lock = KEYS[1] .. 'lock'
  first = redis.call('MGET', lock, KEYS[1] .. 'waiters', KEYS[1] .. 'fence')
  if first[1] == ARGV[2] and first[3] == ARGV[4] and not first[2] then
    redis.call('DEL', lock)
    return 1
  end
elseif ARGV[1] == '0' and #ARGV == 1 + 3 * #KEYS and #KEYS <= 1000 then
  -- The same case for leases released together (a merged call): one read of every resource and,
  -- when each is the common case, one delete, instead of two commands per resource; a command
  -- called from a script costs the node more to call than to run. Else the loop below reads
  -- each resource again (another in the call may have changed it). At most 1,000 resources: Lua
  -- unpacks at most 8,000 values.
  local keys = {}
  for i = 1, #KEYS do
    local base = KEYS[i]
    keys[3 * i - 2], keys[3 * i - 1], keys[3 * i] = base .. 'lock', base .. 'waiters', base .. 'fence'
  end
  local held = redis.call('MGET', unpack(keys))
  local locks = {}
  for i = 1, #KEYS do
    if held[3 * i - 2] ~= ARGV[3 * i - 1] or held[3 * i] ~= ARGV[3 * i + 1] or held[3 * i - 1] then
      locks = nil
      break
    end
    locks[i] = keys[3 * i - 2]
  end
  if locks then
    -- Every one released (includes/reply.lua), unless fewer were deleted than named: a lease
    -- released twice in the call, released by its first entry.
    if redis.call('DEL', unpack(locks)) == #locks then
      return 1
    end
    local out, seen = {}, {}
    for i = 1, #locks do
      out[i] = seen[locks[i]] and 0 or 1
      seen[locks[i]] = true
    end
    return out
  end
end
local plain = #ARGV == #KEYS
local dropClaims = not plain and ARGV[1] == '1'
local giveBack = not plain and ARGV[1] == '3'
local cleanup = not plain and ARGV[1] ~= '0'
-- @include waiters
-- @include reply
-- One resource: its entry alone (see Returns), without building the array.
local out = #KEYS ~= 1 and {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock = base .. 'lock'
  local value, claimId, fence = ARGV[i], '', ''
  if not plain then
    value, claimId, fence = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  end
  -- One read for the lock and the waiter mark; with a fence to check, the fence too.
  local held = first
    or fence == '' and redis.call('MGET', lock, base .. 'waiters')
    or redis.call('MGET', lock, base .. 'waiters', base .. 'fence')
  -- A lock handed to the value is its own whatever the fence: a handoff raised it past the lease's
  -- token where the value won on a quorum of other nodes first (its record, read only then, says so).
  local current = fence == '' or held[3] == fence
    or held[1] == value and redis.call('GET', waiterKey(base, value)) == 'handed'
  local code = 0
  if current and held[1] == value then
    local served = false
    if held[2] then
      -- A lease hands the lock on with its token + 1 (every node that held the lease holds that
      -- token, so each hands the next holder the same one); a handoff given back, with its own; a
      -- failed attempt cleaning up only reserves it.
      local bumped = not cleanup and fence ~= '' and string.format('%.0f', tonumber(fence) + 1)
      local token = giveBack and fence or bumped or nil
      served = serveFirst(base, lock, token, giveBack, held[3] or false)
      -- Waiters that do not queue take a free or reserved lock, not a handed one.
      if served ~= 'handed' then
        redis.call('PUBLISH', base .. 'released', '')
      end
    end
    if not served then
      redis.call('DEL', lock)
    end
    code = 1
  elseif held[2] and not cleanup then
    -- Not ours here, but we may be queued: leave, passing on a reservation made for us (see above).
    if dequeueValue(base, value) and held[1] == '|' then
      passOn(base, lock)
      code = 1
    end
  end
  if dropClaims and claimId ~= '' and current then
    local claim = base .. 'claim:' .. claimId
    if redis.call('GET', claim) == value then
      redis.call('DEL', claim)
    end
  elseif cleanup and claimId ~= '' and current then
    local id, start, restore = string.match(claimId, '^([^|]*)|([^|]*)(.*)$')
    local claim = id and base .. 'claim:' .. id
    if claim and redis.call('GET', claim) == value .. '|' .. start then
      redis.call('SET', claim, value, 'KEEPTTL')
    end
    -- A failed attempt leaves no token behind: a later claim's fence then means its run was granted.
    if claim and fence ~= '' and restore ~= '' then
      if restore == '|' then
        redis.call('DEL', base .. 'fence')
      else
        redis.call('SET', base .. 'fence', string.sub(restore, 2), 'KEEPTTL')
      end
    end
  end
  if not out then
    return code
  end
  out[i] = code
end
return reply(out)
