-- Retention of the near-duplicate index: deletes whole groups whose latest member is older than a cutoff.
-- KEYS[1] = the group's fingerprint hash (for Redis Cluster routing; every key below shares its slot).
-- ARGV[1] = tagged prefix (newsflow.keys.Keys.nd), ARGV[2] = cutoff (UTC epoch s, exclusive),
-- ARGV[3] = at most this many groups per call (the caller loops until a call returns 0 groups).
-- A group goes as a whole (never some of its members), so what stays is still a function of the input:
-- its id, founder and representative do not change. For each member: its band entries, fingerprint,
-- MinHash, article -> group entry and serving hash, and the same for each of its versions (P:rev,
-- P:versions); then the group's hash and sets and its index entries.
-- Returns {groups deleted, articles deleted}.
local P = ARGV[1]
local cutoff = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local groups = redis.call('ZRANGEBYSCORE', P .. ':clusters:by_latest', '-inf', '(' .. cutoff, 'LIMIT', 0, limit)
local articles = 0
for _, cid in ipairs(groups) do
  local ck = P .. ':cluster:' .. cid
  local members = redis.call('SMEMBERS', ck .. ':articles')
  if #members == 0 then members = {string.sub(cid, 2)} end  -- a group of one has no keys of its own
  for _, aid in ipairs(members) do
    -- an article with several versions (revisions, assign.lua) has every version's id indexed
    local vids = redis.call('HKEYS', P .. ':versions:' .. aid)
    table.insert(vids, aid)
    for _, vid in ipairs(vids) do
      local fp = redis.call('HGET', P .. ':fp', vid)
      if fp then
        for i = 0, 3 do
          local s = 16 - 4 * i - 3
          redis.call('SREM', P .. ':lsh:' .. i .. ':' .. string.sub(fp, s, s + 3), fp .. ':' .. vid)
        end
      end
      redis.call('HDEL', P .. ':fp', vid)
      redis.call('HDEL', P .. ':mh', vid)
      redis.call('HDEL', P .. ':rev', vid)
    end
    redis.call('DEL', P .. ':versions:' .. aid)
    redis.call('HDEL', P .. ':a2c', aid)
    redis.call('DEL', P .. ':article:' .. aid)
    articles = articles + 1
  end
  redis.call('DEL', ck, ck .. ':articles', ck .. ':sources', ck .. ':languages')
  redis.call('ZREM', P .. ':clusters:by_size', cid)
  redis.call('ZREM', P .. ':clusters:by_latest', cid)
end
return {#groups, articles}
