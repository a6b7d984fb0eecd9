-- Near-duplicate cluster assignment for a batch of articles, atomically.
-- KEYS[1] = the group's fingerprint hash (for Redis Cluster routing; every key below shares its slot).
-- ARGV[1] = tagged prefix of the near-duplicate group from newsflow.keys.Keys.nd (e.g. "nf:{nd}"; this
-- script never spells a prefix itself), ARGV[2] = max Hamming distance, ARGV[3] = JSON array of articles:
--   {id, fp (16 hex, big-endian), title, url, domain, name, t (event time, epoch s as string),
--    lang, auth (source authority as string), feed (0/1), pt (publish time string or ""), paywall (0/1)}
-- Returns a JSON array of {id, cluster, new (0/1), created (0/1), merged = [cluster ids merged into cluster]}.
-- Order independence: a group is named "c" .. its founder, the member with the earliest (event time,
-- article id); membership is the connected components of "within the Hamming threshold"; the
-- representative and the time range are order-free functions of the members. An earlier article
-- arriving late renames its group (the old name is merged into the new one and deleted), so any
-- arrival order of the same articles leaves the same keys and values; no merge history is kept.
-- Band sets hold members "<fp hex>:<article id>".
-- Band i of a fingerprint = bits [16i, 16i+16) counted from the least significant bit, i.e. hex
-- characters (16-4i-3 .. 16-4i) of the big-endian hex string; key <tagged prefix>:lsh:<i>:<4 hex>.
local P = ARGV[1]
local maxd = tonumber(ARGV[2])
local docs = cjson.decode(ARGV[3])

-- popcount of a 16-bit value (SWAR bit counting, Lua 5.1 bit library)
local function pop16(x)
  x = x - bit.band(bit.rshift(x, 1), 0x5555)
  x = bit.band(x, 0x3333) + bit.band(bit.rshift(x, 2), 0x3333)
  x = bit.band(x + bit.rshift(x, 4), 0x0F0F)
  return bit.band(x + bit.rshift(x, 8), 0x1F)
end

local function bands(fp)
  local b = {}
  for i = 0, 3 do
    local s = 16 - 4 * i - 3
    b[i] = string.sub(fp, s, s + 3)
  end
  return b
end

local function distance(fa, fb)
  local d = 0
  for i = 0, 3 do
    local s = 16 - 4 * i - 3
    d = d + pop16(bit.bxor(tonumber(string.sub(fa, s, s + 3), 16), tonumber(string.sub(fb, s, s + 3), 16)))
  end
  return d
end

-- true when (time a, id a) is before (time b, id b): the founder order of a group
local function earlier(t_a, id_a, t_b, id_b)
  if t_a ~= t_b then return t_a < t_b end
  return id_a < id_b
end

-- true when (auth a, time a, id a) ranks before b as representative:
-- higher authority, then earlier event time, then smaller article id.
local function better(auth_a, t_a, id_a, auth_b, t_b, id_b)
  if auth_a ~= auth_b then return auth_a > auth_b end
  if t_a ~= t_b then return t_a < t_b end
  return id_a < id_b
end

local function ckey(cid) return P .. ':cluster:' .. cid end

local function set_representative(cid, aid, title, url, domain, auth, t)
  redis.call('HSET', ckey(cid), 'representative_id', aid, 'representative_title', title,
    'representative_url', url, 'representative_domain', domain, 'rep_authority', auth, 'rep_time', t)
end

local function offer(cid, aid, title, url, domain, auth_s, t_s)
  local h = redis.call('HMGET', ckey(cid), 'representative_id', 'rep_authority', 'rep_time')
  if (not h[1]) or better(tonumber(auth_s), tonumber(t_s), aid, tonumber(h[2]), tonumber(h[3]), h[1]) then
    set_representative(cid, aid, title, url, domain, auth_s, t_s)
  end
end

local function extend(cid, t_s)
  if not t_s then return end
  local h = redis.call('HMGET', ckey(cid), 'earliest_time', 'latest_time')
  local t = tonumber(t_s)
  if (not h[1]) or t < tonumber(h[1]) then redis.call('HSET', ckey(cid), 'earliest_time', t_s) end
  if (not h[2]) or t > tonumber(h[2]) then
    redis.call('HSET', ckey(cid), 'latest_time', t_s)
    redis.call('ZADD', P .. ':clusters:by_latest', t, cid)
  end
end

-- A group of one article has no keys of its own: its id is "c" .. article id, its data is the
-- article's serving hash, and only its retention index entry exists. Keys are made when a second
-- article joins (most articles are never copied, and a group's keys cost ~2.4 KB).
local function is_singleton(cid) return redis.call('EXISTS', ckey(cid)) == 0 end

local function founder(cid)
  local h = redis.call('HMGET', ckey(cid), 'created_by', 'founder_time')
  if h[1] then return h[1], tonumber(h[2]) or 0 end
  local aid = string.sub(cid, 2)
  return aid, tonumber(redis.call('HGET', P .. ':article:' .. aid, 'event_time')) or 0
end

local function refresh_size(cid)
  redis.call('ZADD', P .. ':clusters:by_size', redis.call('SCARD', ckey(cid) .. ':articles'), cid)
end

-- Adds stored article `m` (fields from its serving hash) to group `dst`'s keys.
local function add_member(dst, m)
  local h = redis.call('HMGET', P .. ':article:' .. m, 'title', 'url', 'source_domain', 'source_authority',
    'event_time', 'language')
  redis.call('SADD', ckey(dst) .. ':articles', m)
  redis.call('HSET', P .. ':a2c', m, dst)
  redis.call('HSET', P .. ':article:' .. m, 'cluster_id', dst)
  redis.call('SADD', ckey(dst) .. ':sources', h[3])
  redis.call('SADD', ckey(dst) .. ':languages', h[6])
  offer(dst, m, h[1], h[2], h[3], h[4], h[5])
  extend(dst, h[5])
end

-- Merge cluster `src` into `dst`: members, sources, languages, representative and time range.
local function merge(src, dst)
  if is_singleton(src) then
    add_member(dst, string.sub(src, 2))
    redis.call('ZREM', P .. ':clusters:by_latest', src)
    refresh_size(dst)
    return
  end
  local members = redis.call('SMEMBERS', ckey(src) .. ':articles')
  for _, m in ipairs(members) do
    redis.call('SADD', ckey(dst) .. ':articles', m)
    redis.call('HSET', P .. ':a2c', m, dst)
    redis.call('HSET', P .. ':article:' .. m, 'cluster_id', dst)
  end
  redis.call('SUNIONSTORE', ckey(dst) .. ':sources', ckey(dst) .. ':sources', ckey(src) .. ':sources')
  redis.call('SUNIONSTORE', ckey(dst) .. ':languages', ckey(dst) .. ':languages', ckey(src) .. ':languages')
  local h = redis.call('HMGET', ckey(src), 'representative_id', 'representative_title', 'representative_url',
    'representative_domain', 'rep_authority', 'rep_time', 'earliest_time', 'latest_time')
  if h[1] then
    offer(dst, h[1], h[2], h[3], h[4], h[5], h[6])
    extend(dst, h[7])
    extend(dst, h[8])
  end
  redis.call('DEL', ckey(src), ckey(src) .. ':articles', ckey(src) .. ':sources', ckey(src) .. ':languages')
  redis.call('ZREM', P .. ':clusters:by_size', src)
  redis.call('ZREM', P .. ':clusters:by_latest', src)
  refresh_size(dst)
end

local results = {}
for _, a in ipairs(docs) do
  local existing = redis.call('HGET', P .. ':a2c', a.id)
  local t_a = tonumber(a.t) or 0
  if existing then
    table.insert(results, {id = a.id, cluster = existing, new = 0, created = 0, merged = {}})
  else
    local b = bands(a.fp)
    local groups = {}
    local checked = {}
    for i = 0, 3 do
      -- band members are "<fp hex>:<article id>", so no per-candidate lookup is needed
      local members = redis.call('SMEMBERS', P .. ':lsh:' .. i .. ':' .. b[i])
      for _, member in ipairs(members) do
        local cand = string.sub(member, 18)
        if checked[cand] == nil and cand ~= a.id then
          checked[cand] = true
          if distance(a.fp, string.sub(member, 1, 16)) <= maxd then
            groups[redis.call('HGET', P .. ':a2c', cand)] = true
          end
        end
      end
    end
    -- the group's founder: the earliest (event time, id) of the new article and the groups it joins
    local fid, ft = a.id, t_a
    for g, _ in pairs(groups) do
      local gid, gt = founder(g)
      if gid and earlier(gt, gid, ft, fid) then fid, ft = gid, gt end
    end
    local cid, created, merged = 'c' .. fid, 0, {}
    local joins = next(groups) ~= nil
    if fid == a.id then created = 1 end
    if joins and fid == a.id then
      redis.call('HSET', ckey(cid), 'cluster_id', cid, 'created_by', a.id, 'founder_time', a.t)
    elseif joins and is_singleton(cid) then
      -- the founder was alone so far: its group gets keys now
      redis.call('HSET', ckey(cid), 'cluster_id', cid, 'created_by', fid,
        'founder_time', redis.call('HGET', P .. ':article:' .. fid, 'event_time'))
      add_member(cid, fid)
    end
    local sorted = {}
    for g, _ in pairs(groups) do
      if g ~= cid then table.insert(sorted, g) end
    end
    table.sort(sorted)
    for _, g in ipairs(sorted) do
      merge(g, cid)
      table.insert(merged, g)
    end
    redis.call('HSET', P .. ':fp', a.id, a.fp)
    for i = 0, 3 do redis.call('SADD', P .. ':lsh:' .. i .. ':' .. b[i], a.fp .. ':' .. a.id) end
    redis.call('HSET', P .. ':a2c', a.id, cid)
    redis.call('HSET', P .. ':article:' .. a.id, 'article_id', a.id, 'title', a.title, 'url', a.url,
      'source_domain', a.domain, 'source_name', a.name, 'event_time', a.t, 'publish_time', a.pt,
      'language', a.lang, 'simhash', a.fp, 'cluster_id', cid, 'source_authority', a.auth, 'feed_only', a.feed,
      'paywalled', a.paywall or '0')
    if joins then
      redis.call('SADD', ckey(cid) .. ':articles', a.id)
      redis.call('SADD', ckey(cid) .. ':sources', a.domain)
      redis.call('SADD', ckey(cid) .. ':languages', a.lang)
      offer(cid, a.id, a.title, a.url, a.domain, a.auth, a.t)
      extend(cid, a.t)
      refresh_size(cid)
    else
      redis.call('ZADD', P .. ':clusters:by_latest', t_a, cid)  -- a group of one: no keys (is_singleton)
    end
    table.insert(results, {id = a.id, cluster = cid, new = 1, created = created, merged = merged})
  end
end
return cjson.encode(results)
