-- A script's reply (each script's Returns): one entry per resource, or, when every resource's
-- entry is the same code (always so for one resource), that code alone: an array costs the node
-- more to send and the client more to read (CallCoalescer gives each caller its entries either way).
local function reply(out)
  for i = 2, #out do
    if out[i] ~= out[1] then
      return out
    end
  end
  return out[1] or out
end
