--[[
  start: marks a granted claim started by one start id (for the scheduler: the
  first start of a tick's job, named by the fence it was published with), so
  that the claim can never be started by another id, nor granted again by a
  takeover: its value becomes '<lease value>|<start id>', which no acquire
  supplies. Each node moves a claim from its lease value to a start once; a
  start id already there is this start's own (a retry), and a start that
  continues another (a retry of the work after its first start: `prior`)
  accepts that one's id and leaves it. A claim this node never recorded (the
  grant reached a quorum without it, or the node lost its data) is recorded
  started, kept for the claim retention.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the
  script appends `claim:<id>`.

  A start that `replaces` another start id (a backfill of a tick whose job did
  not run) moves a claim that start holds to itself.
  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     claim retention, ms (for a claim this node did not have)
    for resource i: ARGV[5i-3] claim id, ARGV[5i-2] the claim's lease value,
                    ARGV[5i-1] start id, ARGV[5i] the start it continues ('' = none),
                    ARGV[5i+1] the start it replaces ('' = none)
  Returns one entry per resource, or the code alone when every resource's is the
  same code (includes/reply.lua; a call for one resource returns its entry alone):
    1  STARTED   the claim is started by this start id (now, or by an earlier call)
   -1  CLAIMED   {-1, holder}: another value or another start holds the claim
]]
-- @include claimstart
-- @include reply
local retention = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local claim = KEYS[i] .. 'claim:' .. ARGV[5 * i - 3]
  local value, start, prior, replaces = ARGV[5 * i - 2], ARGV[5 * i - 1], ARGV[5 * i], ARGV[5 * i + 1]
  out[i] = startClaim(claim, value, start, prior, retention, replaces) or 1
end
return reply(out)
