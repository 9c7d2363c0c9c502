--[[
  claim: records claims without any lock (Redlock.claimBatch): a claim id is
  granted once, to one value, and kept for the claim retention; nothing else of
  the resource is read or written. For the scheduler, a tick's claim: the
  replica that wins it publishes the tick's job, whose worker later takes the
  schedule's lease and starts the claim (acquire.lua with a start). A claim
  already held by the value counts as ours (a takeover by the claim's value, as
  a recovery makes). Drop mode takes back claims a failed attempt recorded:
  only where the claim still holds that value (not started, not another's).
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `claim:<id>`. Common path: one SET NX GET per resource.

  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     claim retention, ms; '' to drop instead
    for resource i: ARGV[2i] claim id, ARGV[2i+1] value (no '|')
  Returns one entry per resource, or the code alone when every resource's is the
  same code (includes/reply.lua; a call for one resource returns its entry alone):
    1  CLAIMED   the claim holds our value (recorded now, or before); drop mode: dropped
    0  NOT_HELD  drop mode: the claim holds another value, or nothing
   -1  HELD      {-1, holder}: another value holds the claim, or a start of any value
                 ('<value>|<start id>')
]]
-- @include reply
local retention = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local claim = KEYS[i] .. 'claim:' .. ARGV[2 * i]
  local value = ARGV[2 * i + 1]
  if retention == '' then
    out[i] = 0
    if redis.call('GET', claim) == value then
      redis.call('DEL', claim)
      out[i] = 1
    end
  else
    local holder = redis.call('SET', claim, value, 'NX', 'PX', retention, 'GET')
    out[i] = (not holder or holder == value) and 1 or { -1, holder }
  end
end
return reply(out)
