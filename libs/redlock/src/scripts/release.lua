--[[
  release: compare-and-delete the lock of each resource; optionally also drops
  a claim recorded by the same value (only after a failed acquire attempt: a
  granted claim must outlive the lease). Fences are never deleted.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `lock` and `claim:<id>`.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     '1' to drop claims recorded by the value too (with a fence: only while it is current)
    for resource i: ARGV[3i-1] lease value, ARGV[3i] claim id ('' = none),
                    ARGV[3i+1] fence ('' = any): with one, the lock is deleted
                    only while the resource's fence is still that - nobody was
                    granted since (a failed attempt cleaning up: another holder
                    of the same value, a takeover, may have refreshed it since)
  Returns an array, one code per resource:
    1  RELEASED     the key held our value and is deleted
    0  NOT_HELD     the key is gone or holds another value
]]
local dropClaims = ARGV[1] == '1'
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local lock = base .. 'lock'
  local value, claimId, fence = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local current = fence == '' or redis.call('GET', base .. 'fence') == fence
  if current and redis.call('GET', lock) == value then
    redis.call('DEL', lock)
    out[i] = 1
  else
    out[i] = 0
  end
  if dropClaims and claimId ~= '' and current then
    local claim = base .. 'claim:' .. claimId
    if redis.call('GET', claim) == value then
      redis.call('DEL', claim)
    end
  end
end
return out
