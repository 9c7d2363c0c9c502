-- Moves a claim to a start, shared by start and acquire (scripts.ts puts this file where a
-- script says `-- @include claimstart`). The claim key `claim` holds `holder` (GET, read by
-- the caller); `value` is the claim's lease value. A claim held by the value moves to
-- '<value>|<start>', keeping its TTL; one this node never recorded is recorded started for
-- `retention` ms; one already started by this start id, or by `prior` (the start this one
-- continues, '' = none), stays. Returns nil when the claim is (now) started by this start,
-- else {-1, holder}: another value or another start holds it.
local function startClaim(claim, holder, value, start, prior, retention)
  local started = value .. '|' .. start
  if holder == started or (prior ~= '' and holder == value .. '|' .. prior) then
    return nil
  elseif holder == value then
    redis.call('SET', claim, started, 'KEEPTTL')
  elseif not holder then
    redis.call('SET', claim, started, 'PX', retention)
  else
    return { -1, holder }
  end
  return nil
end
