-- Near-duplicate cluster assignment for a batch of articles, atomically.
-- KEYS[1] = the group's fingerprint hash (for Redis Cluster routing; every key below shares its slot).
-- ARGV[1] = tagged prefix of the near-duplicate group from newsflow.keys.Keys.nd (e.g. "nf:{nd}"; this
-- script never spells a prefix itself), ARGV[2] = max Hamming distance, ARGV[3] = JSON array of articles:
--   {id, fp (16 hex, big-endian), title, url, domain, name, t (event time, epoch s as string),
--    lang, auth (source authority as string), feed (0/1), pt (publish time string or ""), paywall (0/1),
--    ft (fetch time string), outlet (registrable domain or "")},
-- ARGV[4] = minimum MinHash Jaccard of a borderline pair ("" = no re-check), ARGV[5] = largest borderline
-- Hamming distance (pairs at ARGV[2] + 1 .. ARGV[5] bits are near-duplicates when their stored MinHash
-- signatures agree on at least that share of the 128 slots; newsflow/minhash_check.py),
-- ARGV[5 + k] = the k-th article's MinHash signature: 128 big-endian uint32 (512 raw bytes), or "".
-- Returns a JSON array of {id, cluster, article (the id the article is stored under), new (0/1),
-- created (0/1), merged = [cluster ids merged into cluster]}.
-- Order independence: a group is named "c" .. its founder, the member with the earliest (event time,
-- article id); membership is the connected components of "near-duplicate" (within the Hamming threshold,
-- or borderline and confirmed by MinHash); the representative and the time range are order-free functions
-- of the members. An earlier article arriving late renames its group (the old name is merged into the new
-- one and deleted), so any arrival order of the same articles leaves the same keys and values; no merge
-- history is kept.
-- Revisions (newsflow/urls.py, "Article identity" rule 5): near-duplicates of the same outlet with the
-- same publish and event time are versions of one article (a permalink re-slugged after a headline edit).
-- The versions form connected components too; a component is stored as ONE article under the id of its
-- earliest (fetch time, id) version, with the fields (title, URL, ...) of its latest (fetch time, id)
-- version; every other version id maps to it in P:rev, and P:versions:<id> keeps every version's fields
-- so a later version can redo the choice. The groups touched by a revision are rebuilt from their members.
-- Band sets hold members "<fp hex>:<version id>" (a version's fingerprint stays indexed under its own id).
-- Band i of a fingerprint = bits [16i, 16i+16) counted from the least significant bit, i.e. hex
-- characters (16-4i-3 .. 16-4i) of the big-endian hex string; key <tagged prefix>:lsh:<i>:<4 hex>.
local P = ARGV[1]
local maxd = tonumber(ARGV[2])
local docs = cjson.decode(ARGV[3])
local jmin = tonumber(ARGV[4] or '')
local bmax = tonumber(ARGV[5] or '') or maxd

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

-- MinHash signatures: 128 big-endian uint32 slots, stored as 512 bytes; share of equal slots (datasketch's
-- MinHash.jaccard).
local function jaccard(sa, sb)
  if #sa ~= #sb or #sa == 0 then return 0 end
  local n, same = #sa / 4, 0
  for k = 0, n - 1 do
    if string.sub(sa, 4 * k + 1, 4 * k + 4) == string.sub(sb, 4 * k + 1, 4 * k + 4) then same = same + 1 end
  end
  return same / n
end

-- true when a stored version `cand` with fingerprint `cfp` is a near-duplicate of the new article
local function near(fp, sig, cand, cfp)
  local d = distance(fp, cfp)
  if d <= maxd then return true end
  if jmin == nil or d > bmax or sig == nil then return false end
  local other = redis.call('HGET', P .. ':mh', cand)
  return other ~= false and other ~= nil and jaccard(sig, other) >= jmin
end

local function node_of(vid)
  local r = redis.call('HGET', P .. ':rev', vid)
  if r then return r end
  return vid
end

local function members_of(cid)
  if is_singleton(cid) then return {string.sub(cid, 2)} end
  return redis.call('SMEMBERS', ckey(cid) .. ':articles')
end

-- the versions of stored article `n`: its P:versions hash, or (one version) its serving hash
local function versions_of(n)
  local out = {}
  local raw = redis.call('HGETALL', P .. ':versions:' .. n)
  if #raw > 0 then
    for k = 2, #raw, 2 do table.insert(out, cjson.decode(raw[k])) end
    return out
  end
  local h = redis.call('HMGET', P .. ':article:' .. n, 'title', 'url', 'source_domain', 'source_name', 'event_time',
    'publish_time', 'language', 'simhash', 'source_authority', 'feed_only', 'paywalled', 'fetch_time', 'outlet')
  table.insert(out, {id = n, title = h[1], url = h[2], domain = h[3], name = h[4], t = h[5], pt = h[6],
    lang = h[7], fp = h[8], auth = h[9], feed = h[10], paywall = h[11], ft = h[12], outlet = h[13]})
  return out
end

-- a version's fields as JSON with the keys in one fixed order (cjson's table order depends on history)
local VERSION_FIELDS = {'auth', 'domain', 'feed', 'fp', 'ft', 'id', 'lang', 'name', 'outlet', 'paywall', 'pt', 't',
  'title', 'url'}
local function encode_version(v)
  local parts = {}
  for _, k in ipairs(VERSION_FIELDS) do
    table.insert(parts, cjson.encode(k) .. ':' .. cjson.encode(v[k] or ''))
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- version order: (fetch time, id)
local function fetched_before(a, b)
  local fa, fb = tonumber(a.ft) or 0, tonumber(b.ft) or 0
  if fa ~= fb then return fa < fb end
  return a.id < b.id
end

local function write_article(aid, v, cid)
  redis.call('HSET', P .. ':article:' .. aid, 'article_id', aid, 'title', v.title, 'url', v.url,
    'source_domain', v.domain, 'source_name', v.name, 'event_time', v.t, 'publish_time', v.pt,
    'language', v.lang, 'simhash', v.fp, 'cluster_id', cid, 'source_authority', v.auth, 'feed_only', v.feed,
    'paywalled', v.paywall or '0', 'fetch_time', v.ft or '', 'outlet', v.outlet or '')
end

-- true when stored article `n` and the new article `a` are versions of one article (rule 5)
local function is_revision(a, n)
  if a.outlet == nil or a.outlet == '' or a.pt == nil or a.pt == '' then return false end
  local h = redis.call('HMGET', P .. ':article:' .. n, 'outlet', 'publish_time', 'event_time')
  return h[1] == a.outlet and h[2] == a.pt and h[3] == a.t
end

-- Rebuilds one group from its member article ids (all stored): name, founder, sets, representative, range.
local function rebuild(members)
  local fid, ft
  for _, m in ipairs(members) do
    local t = tonumber(redis.call('HGET', P .. ':article:' .. m, 'event_time')) or 0
    if fid == nil or earlier(t, m, ft, fid) then fid, ft = m, t end
  end
  local cid = 'c' .. fid
  if #members == 1 then
    redis.call('HSET', P .. ':a2c', fid, cid)
    redis.call('HSET', P .. ':article:' .. fid, 'cluster_id', cid)
    redis.call('ZADD', P .. ':clusters:by_latest', ft, cid)
    return cid
  end
  redis.call('HSET', ckey(cid), 'cluster_id', cid, 'created_by', fid,
    'founder_time', redis.call('HGET', P .. ':article:' .. fid, 'event_time'))
  for _, m in ipairs(members) do add_member(cid, m) end
  refresh_size(cid)
  return cid
end

local function drop_group(cid)
  redis.call('DEL', ckey(cid), ckey(cid) .. ':articles', ckey(cid) .. ':sources', ckey(cid) .. ':languages')
  redis.call('ZREM', P .. ':clusters:by_size', cid)
  redis.call('ZREM', P .. ':clusters:by_latest', cid)
end

local function index_version(a, sig)
  local b = bands(a.fp)
  redis.call('HSET', P .. ':fp', a.id, a.fp)
  for i = 0, 3 do redis.call('SADD', P .. ':lsh:' .. i .. ':' .. b[i], a.fp .. ':' .. a.id) end
  if sig then redis.call('HSET', P .. ':mh', a.id, sig) end
end

-- The new article `a` is a version of the stored articles `revs` (a set of ids); `others` are the groups
-- of its other near-duplicates. The versions become one article and every touched group is rebuilt.
local function assign_revision(a, sig, revs, others)
  local versions = {}
  local touched = {}
  for n, _ in pairs(revs) do
    for _, v in ipairs(versions_of(n)) do table.insert(versions, v) end
    touched[redis.call('HGET', P .. ':a2c', n)] = true
  end
  for g, _ in pairs(others) do touched[g] = true end
  table.insert(versions, {id = a.id, title = a.title, url = a.url, domain = a.domain, name = a.name, t = a.t,
    pt = a.pt, lang = a.lang, fp = a.fp, auth = a.auth, feed = a.feed, paywall = a.paywall or '0', ft = a.ft,
    outlet = a.outlet})
  table.sort(versions, fetched_before)
  local keep, latest = versions[1].id, versions[#versions]
  -- every article of the touched groups, with the versions replaced by the one article they become
  local members, seen = {}, {}
  local groups = {}
  for g, _ in pairs(touched) do table.insert(groups, g) end
  table.sort(groups)
  for _, g in ipairs(groups) do
    for _, m in ipairs(members_of(g)) do
      if revs[m] == nil and not seen[m] then seen[m] = true; table.insert(members, m) end
    end
    drop_group(g)
  end
  table.insert(members, keep)
  for n, _ in pairs(revs) do
    redis.call('DEL', P .. ':versions:' .. n)
    if n ~= keep then
      redis.call('HDEL', P .. ':a2c', n)
      redis.call('DEL', P .. ':article:' .. n)
    end
  end
  local vh = {}
  for _, v in ipairs(versions) do
    table.insert(vh, v.id)
    table.insert(vh, encode_version(v))
    if v.id ~= keep then redis.call('HSET', P .. ':rev', v.id, keep) end
  end
  redis.call('HDEL', P .. ':rev', keep)
  redis.call('HSET', P .. ':versions:' .. keep, unpack(vh))
  write_article(keep, latest, '')
  index_version(a, sig)
  local cid = rebuild(members)
  local merged = {}
  for _, g in ipairs(groups) do
    if g ~= cid then table.insert(merged, g) end
  end
  local created = 0
  if cid == 'c' .. keep then created = 1 end
  return {id = a.id, cluster = cid, article = keep, new = 1, created = created, merged = merged}
end

local results = {}
for k, a in ipairs(docs) do
  local existing = redis.call('HGET', P .. ':a2c', a.id)
  local revised = redis.call('HGET', P .. ':rev', a.id)
  local t_a = tonumber(a.t) or 0
  local sig = nil
  if ARGV[5 + k] and ARGV[5 + k] ~= '' then sig = ARGV[5 + k] end
  if existing then
    table.insert(results, {id = a.id, cluster = existing, article = a.id, new = 0, created = 0, merged = {}})
  elseif revised then
    table.insert(results, {id = a.id, cluster = redis.call('HGET', P .. ':a2c', revised), article = revised,
      new = 0, created = 0, merged = {}})
  else
    local b = bands(a.fp)
    local groups = {}
    local revs = {}
    local any_rev = false
    local checked = {}
    for i = 0, 3 do
      -- band members are "<fp hex>:<version id>", so no per-candidate lookup is needed
      local members = redis.call('SMEMBERS', P .. ':lsh:' .. i .. ':' .. b[i])
      for _, member in ipairs(members) do
        local cand = string.sub(member, 18)
        if checked[cand] == nil and cand ~= a.id then
          checked[cand] = true
          if near(a.fp, sig, cand, string.sub(member, 1, 16)) then
            local n = node_of(cand)
            if revs[n] == nil then
              if is_revision(a, n) then
                revs[n] = true
                any_rev = true
              else
                groups[redis.call('HGET', P .. ':a2c', n)] = true
              end
            end
          end
        end
      end
    end
    if any_rev then
      table.insert(results, assign_revision(a, sig, revs, groups))
    else
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
      index_version(a, sig)
      redis.call('HSET', P .. ':a2c', a.id, cid)
      write_article(a.id, a, cid)
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
      table.insert(results, {id = a.id, cluster = cid, article = a.id, new = 1, created = created, merged = merged})
    end
  end
end
return cjson.encode(results)
