--[[
  mark: a value that only rises, with a tag, kept per resource (for the scheduler: how far its
  replicas have taken up ticks, and the queue Redis's data epoch they saw), and read back. A value
  not above the stored one leaves the mark as it is; a higher one replaces value and tag.
  One key per resource: its key base `<prefix>:{<resource>}:` (keys.ts); the script appends `mark`.
  KEYS, for resource i = 1..n:
    KEYS[i]     key base of the resource
  ARGV:
    ARGV[1]     how long the mark is kept after it last rose, ms
    for resource i: ARGV[2i] the value (an integer; '' reads only), ARGV[2i+1] its tag
  Returns one entry per resource (includes/reply.lua): the mark after the call, '<value>|<tag>',
  or '' where there is none.
]]
-- @include reply
local keep = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i] .. 'mark'
  local value, tag = ARGV[2 * i], ARGV[2 * i + 1]
  local stored = redis.call('GET', key)
  if value ~= '' and (not stored or tonumber(value) > tonumber(string.match(stored, '^[^|]*'))) then
    stored = value .. '|' .. tag
    redis.call('SET', key, stored, 'PX', keep)
  end
  out[i] = stored or ''
end
return reply(out)
