-- Near-duplicate lookup: ARGV[1] = key prefix, ARGV[2] = max Hamming distance, ARGV[3] = fingerprint (16 hex).
-- Returns a flat array {id1, d1, id2, d2, ...} of stored items within the distance (unsorted).
local P = ARGV[1]
local maxd = tonumber(ARGV[2])
local fp = ARGV[3]
local POP = {}
for i = 0, 255 do
  local c, v = 0, i
  while v > 0 do c = c + (v % 2); v = math.floor(v / 2) end
  POP[i] = c
end
local out, seen = {}, {}
for i = 0, 3 do
  local s = 16 - 4 * i - 3
  local members = redis.call('SMEMBERS', P .. ':lsh:' .. i .. ':' .. string.sub(fp, s, s + 3))
  for _, cand in ipairs(members) do
    if not seen[cand] then
      seen[cand] = true
      local cfp = redis.call('HGET', P .. ':fp', cand)
      if cfp then
        local d = 0
        for j = 0, 3 do
          local t = 16 - 4 * j - 3
          local x = bit.bxor(tonumber(string.sub(fp, t, t + 3), 16), tonumber(string.sub(cfp, t, t + 3), 16))
          d = d + POP[bit.band(x, 255)] + POP[bit.rshift(x, 8)]
        end
        if d <= maxd then table.insert(out, cand); table.insert(out, d) end
      end
    end
  end
end
return out
