-- ARGV: ns, batch. One step of the rewrite of a layout-3 namespace into layout 4 (migrate.rs),
-- at most `batch` members moved, keys renamed or jobs looked at; returns 'more' or, once every
-- step is done and `layout` is set to LAYOUT, 'done'. Each step is atomic and idempotent:
-- processes that connect at once share the work. In order:
-- 1. the backfill of a namespace written before retention: its acknowledged terminal jobs
--    (in the `jobs` index by creation time, from the cursor `done:backfill`) are filed into
--    `done:{class}`, still sorted sets here, so a job filed twice is filed once;
-- 2. every job's keys (`job:{id}`, its history and long-value keys, `out:{id}`) are renamed to
--    the job's stored id (short_id: a UUID's 22-character base64 form, redis/id.rs), found by
--    a SCAN from the cursor `layout:scan`;
-- 3. every set of job ids is rewritten with stored ids, each moved member by member into
--    `{key}:l4` and renamed to `{key}` once empty (`layout:done`: the keys rewritten so far): `done:succeeded`, `done:failed` and every
--    queue's `ready:{queue}` become lists in score order (finish time; enqueue sequence), and
--    `delayed:{queue}`, `leases`, `results`, `state:*`, `jobs` and `pruned:*` stay sorted sets;
-- 4. the job ids in `idem` (values) and `pruned` (fields), by HSCAN from `layout:scan`.
-- Job hashes are not rewritten otherwise: layout 3 stores every field, which layout 4 reads the
-- same.
local batch = tonumber(ARGV[2])

local bk = NS .. 'done:backfill'
local cursor = redis.call('GET', bk)
if cursor ~= 'done' then
  local rows = redis.call('ZRANGEBYSCORE', NS .. 'jobs', cursor or '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, batch)
  local P = plan('s', 'u')
  for i = 1, #rows, 2 do
    local id = rows[i]
    local f = hmget(jkey(id), P)
    local c = RETAIN_CLASS[f[1] or '']
    if c and not redis.call('ZSCORE', NS .. 'results', id) then
      redis.call('ZADD', NS .. 'done:' .. c, tonumber(f[2]) or 0, id)
    end
  end
  if #rows < 2 * batch then
    redis.call('SET', bk, 'done')
  else
    local first, last = tonumber(rows[2]), tonumber(rows[#rows])
    -- A whole batch of one creation time cannot move an inclusive cursor: step past it.
    if last == first then last = last + 1 end
    redis.call('SET', bk, s(last))
  end
  return 'more'
end

-- The stored form of job id `id` (the rule of redis/id.rs `stored`): a hyphenated UUID's 16
-- bytes as base64 text without padding in the order-keeping alphabet of id.rs (`SORTED`), any
-- other id unchanged.
local B64 = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz'
local UUID = '^' .. string.rep('%x', 8) .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 4) .. '%-'
  .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 12) .. '$'
local function short_id(id)
  if #id ~= 36 or not string.match(id, UUID) then return id end
  local hex = string.gsub(id, '-', '')
  local out = {}
  local function put(v) out[#out + 1] = string.sub(B64, v + 1, v + 1) end
  -- Five groups of 3 bytes (6 hex digits) give 4 characters each; the 16th byte gives 2.
  for i = 1, 25, 6 do
    local v = tonumber(string.sub(hex, i, i + 5), 16)
    put(math.floor(v / 262144) % 64); put(math.floor(v / 4096) % 64); put(math.floor(v / 64) % 64); put(v % 64)
  end
  local last = tonumber(string.sub(hex, 31, 32), 16)
  put(math.floor(last / 4)); put((last % 4) * 16)
  return table.concat(out)
end

local scan_k = NS .. 'layout:scan'
local step = redis.call('GET', NS .. 'layout:step') or 'keys'

if step == 'keys' then
  local r = redis.call('SCAN', redis.call('GET', scan_k) or '0', 'MATCH', NS .. 'job:*', 'COUNT', batch)
  local head = #NS + 5
  for _, key in ipairs(r[2]) do
    local id = string.sub(key, head)
    local short = short_id(id)
    if short ~= id then
      local jk = NS .. 'job:' .. short
      if redis.call('EXISTS', jk) == 0 then
        redis.call('RENAME', key, jk)
        for _, side in ipairs({ ':history', ':p', ':x', ':o', ':e' }) do
          if redis.call('EXISTS', key .. side) == 1 then redis.call('RENAME', key .. side, jk .. side) end
        end
        if redis.call('EXISTS', NS .. 'out:' .. id) == 1 then redis.call('RENAME', NS .. 'out:' .. id, NS .. 'out:' .. short) end
      end
    end
  end
  if r[1] == '0' then
    redis.call('DEL', scan_k)
    redis.call('SET', NS .. 'layout:step', 'sets')
  else
    redis.call('SET', scan_k, r[1])
  end
  return 'more'
end

if step == 'sets' then
  -- {key, becomes a list}
  local keys = { { 'done:succeeded', true }, { 'done:failed', true }, { 'leases', false }, { 'results', false },
    { 'jobs', false }, { 'pruned:succeeded', false }, { 'pruned:failed', false } }
  for st in pairs(INDEXED) do keys[#keys + 1] = { 'state:' .. st, false } end
  for _, q in ipairs(redis.call('SMEMBERS', NS .. 'queues')) do
    keys[#keys + 1] = { 'ready:' .. q, true }
    keys[#keys + 1] = { 'delayed:' .. q, false }
  end
  -- Keys already rewritten in this step (a rewritten sorted set is a sorted set again).
  local done_k = NS .. 'layout:done'
  for _, k in ipairs(keys) do
    local key, to_list = NS .. k[1], k[2]
    local tmp = key .. ':l4'
    local t = redis.call('TYPE', key)['ok']
    if redis.call('SISMEMBER', done_k, key) == 1 then
      t = 'done'
    elseif t == 'none' and redis.call('EXISTS', tmp) == 0 then
      redis.call('SADD', done_k, key)
      t = 'done'
    end
    if t == 'zset' then
      local rows = redis.call('ZRANGE', key, 0, batch - 1, 'WITHSCORES')
      local ids, moved = {}, {}
      for i = 1, #rows, 2 do
        ids[#ids + 1] = rows[i]
        if to_list then moved[#moved + 1] = short_id(rows[i])
        else moved[#moved + 1] = rows[i + 1]; moved[#moved + 1] = short_id(rows[i]) end
      end
      redis.call(to_list and 'RPUSH' or 'ZADD', tmp, unpack(moved))
      redis.call('ZREM', key, unpack(ids))
      if redis.call('EXISTS', key) == 0 then
        redis.call('RENAME', tmp, key)
        redis.call('SADD', done_k, key)
      end
      return 'more'
    elseif t == 'none' then
      redis.call('RENAME', tmp, key)
      redis.call('SADD', done_k, key)
      return 'more'
    elseif t ~= 'done' then
      -- Already a list (a namespace rewritten into lists by an earlier try of this step).
      redis.call('SADD', done_k, key)
    end
  end
  redis.call('DEL', done_k)
  redis.call('SET', NS .. 'layout:step', 'hashes')
  return 'more'
end

if step == 'hashes' then
  -- `idem`: key → job id (values); `pruned`: job id → tombstone (fields).
  local r = redis.call('HSCAN', NS .. 'idem', redis.call('GET', scan_k) or '0', 'COUNT', batch)
  for i = 1, #r[2], 2 do
    local short = short_id(r[2][i + 1])
    if short ~= r[2][i + 1] then redis.call('HSET', NS .. 'idem', r[2][i], short) end
  end
  if r[1] ~= '0' then redis.call('SET', scan_k, r[1]); return 'more' end
  redis.call('DEL', scan_k)
  redis.call('SET', NS .. 'layout:step', 'tombstones')
  return 'more'
end

if step == 'tombstones' then
  local r = redis.call('HSCAN', NS .. 'pruned', redis.call('GET', scan_k) or '0', 'COUNT', batch)
  for i = 1, #r[2], 2 do
    local short = short_id(r[2][i])
    if short ~= r[2][i] then
      redis.call('HSET', NS .. 'pruned', short, r[2][i + 1])
      redis.call('HDEL', NS .. 'pruned', r[2][i])
    end
  end
  if r[1] ~= '0' then redis.call('SET', scan_k, r[1]); return 'more' end
end

redis.call('DEL', scan_k, NS .. 'layout:step')
redis.call('SET', NS .. 'layout', LAYOUT)
return 'done'
