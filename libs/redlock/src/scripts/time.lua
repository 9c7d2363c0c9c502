--[[
  time: the node's clock (Redlock.nodeTime), for the processes that take it as
  their time reference (ReferenceClock); nothing is read or written.

  KEYS: none
  ARGV: none
  Returns TIME's reply: {seconds, microseconds} since the Unix epoch.
]]
return redis.call('TIME')
