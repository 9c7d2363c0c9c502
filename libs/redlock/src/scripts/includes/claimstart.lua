-- Moves a claim to a start, shared by start and acquire (scripts.ts puts this file where a
-- script says `-- @include claimstart`). `value` is the claim's lease value. A claim held by the
-- value moves to '<value>|<start>', keeping its TTL; one this node never recorded is recorded
-- started for `retention` ms; one already started by this start id, or by `prior` (the start
-- this one continues, '' = none), stays; one started by `replaces` (a start whose work did not run,
-- which a backfill takes over; '' = none) moves to this start. Returns nil and what the claim held
-- before (false: nothing) when it is (now) started by this start, else {-1, holder}: another value
-- or another start holds it.
-- The write comes first (SET XX GET): the claim almost always holds the value, so the usual
-- start is one command; any other holder is written back as it was.
local function startClaim(claim, value, start, prior, retention, replaces)
  local started = value .. '|' .. start
  local holder = redis.call('SET', claim, started, 'XX', 'KEEPTTL', 'GET')
  if holder == value or holder == started then
    return nil, holder
  elseif not holder then
    redis.call('SET', claim, started, 'PX', retention)
    return nil, false
  end
  if replaces ~= '' and holder == value .. '|' .. replaces then
    return nil, holder
  end
  redis.call('SET', claim, holder, 'KEEPTTL')
  if prior ~= '' and holder == value .. '|' .. prior then
    return nil, holder
  end
  return { -1, holder }
end
