-- ARGV: ns, class ('succeeded' | 'failed'), limit, jobs_before_ms, jobs_keep_newest,
--       tombs_before_ms, tombs_keep_newest, count_only ('1' = count, remove nothing),
--       count_from, counted (count_only: the `done:{class}` position to count from, and the
--       jobs counted before it)
-- ('' = no such bound). See crate::retention.
-- Prunes at most `limit` jobs of the list `done:{class}` (acknowledged terminal jobs in
-- acknowledgement order, oldest first) selected by the job bounds, walking from its head: the
-- first live entries beyond the newest `keep` are selected, then any finished (`u`) before
-- `before`; the walk stops at the first entry neither selects. A pruned job's hash, history
-- list, output stream and long-value keys, and its `state:{state}` and `jobs` entries go; a tombstone stays
-- (`pruned` hash: id → "state<TAB>finished_at<TAB>pruned_at<TAB>idem_key"; `pruned:{class}` set
-- by prune time), and the job's `idem` entry stays with it. Stale entries (a retried job's, see
-- RETAIN_CLASS in common.lua) and entries whose job is gone, not in the class or has a pending
-- result are dropped without touching the job (it re-enters at its next acknowledgement). Then
-- prunes at most `limit` tombstones of the class selected by the tombstone bounds (oldest prune
-- first), freeing their idempotency keys.
-- At most ~9 key operations per job and 4 per tombstone, and at most 2 × limit entries looked
-- at: a call with limit 400 touches a few thousand keys.
-- Returns {jobs, tombstones, more (0/1)}; with count_only, {jobs, tombstones, next_from}: the
-- jobs selected among at most COUNT_BUDGET entries from count_from, the tombstones selected
-- now, and where to count on (-1 = the walk ended).
local class, limit = ARGV[2], tonumber(ARGV[3])
local before, keep = ARGV[4], ARGV[5]
local count_only = ARGV[8] == '1'
local dk = NS .. 'done:' .. class
local stale_k = dk .. ':stale'
local tk = NS .. 'pruned:' .. class
local pk = NS .. 'pruned'
local COUNT_BUDGET = 5000
local CHUNK = 256

-- How many of the oldest entries of sorted set `key` the bounds select.
local function selected(key, b, k)
  local n = 0
  if b ~= '' then n = redis.call('ZCOUNT', key, '-inf', '(' .. b) end
  if k ~= '' then
    local excess = redis.call('ZCARD', key) - tonumber(k)
    if excess > n then n = excess end
  end
  return n
end

-- Live entries beyond the newest `keep` (the count bound's selection).
local excess = 0
if keep ~= '' then
  local live = redis.call('LLEN', dk) - tonumber(redis.call('GET', stale_k) or '0')
  excess = math.max(0, live - tonumber(keep))
end
local before_n = tonumber(before)

-- Walks the list from position `from` (`taken` jobs before it were selected), calling
-- visit(id, f, verdict) for each entry looked at, f = its job's s, u, k, sd: verdict 'stale'
-- (the job's `sd` counts it), 'drop' or 'take'; stops at the first entry neither selects
-- (returns 'stop'), at the end ('end'), or after `budget` entries or `max_take` takes
-- ('budget'). Also returns the position it stopped at.
local P = plan('s', 'u', 'k', 'sd', 'q')
local function walk(from, taken, budget, max_take, visit)
  local looked, took = 0, 0
  local pos = from
  while looked < budget do
    local ids = redis.call('LRANGE', dk, pos, pos + math.min(CHUNK, budget - looked) - 1)
    if #ids == 0 then return 'end', pos end
    for _, id in ipairs(ids) do
      local f = hmget(jkey(id), P)
      local verdict
      -- Only `done:failed` has stale entries: a retried job was failed, dead or cancelled.
      if f[1] and class == 'failed' and f[4] ~= '0' then
        verdict = 'stale'
      elseif not f[1] or RETAIN_CLASS[f[1]] ~= class or redis.call('ZSCORE', NS .. 'results', id) then
        verdict = 'drop'
      elseif taken < excess or (before_n and tonumber(f[2]) < before_n) then
        verdict = 'take'
        taken = taken + 1
        took = took + 1
      else
        return 'stop', pos
      end
      visit(id, f, verdict)
      looked = looked + 1
      pos = pos + 1
      if looked >= budget or took >= max_take then return 'budget', pos end
    end
  end
  return 'budget', pos
end

if count_only then
  local n = 0
  local from = tonumber(ARGV[9] or '0')
  local why, pos = walk(from, tonumber(ARGV[10] or '0'), COUNT_BUDGET, COUNT_BUDGET, function(_, _, verdict)
    if verdict == 'take' then n = n + 1 end
  end)
  -- The count bound's selection continues across calls: `counted` were taken before `from`.
  if why ~= 'budget' then pos = -1 end
  return { n, selected(tk, ARGV[6], ARGV[7]), pos }
end

local now = now_ms()
local jobs = 0
local why, looked = 'end', 0
if limit > 0 and (excess > 0 or before_n) then
  why, looked = walk(0, 0, 2 * limit, limit, function(id, f, verdict)
    if verdict == 'stale' then
      hset(jkey(id), { 'sd', s(tonumber(f[4]) - 1) })
      redis.call('DECR', stale_k)
    elseif verdict == 'take' then
      redis.call('DEL', unpack(job_keys(id)))
      metric('depth', f[5], '', '', f[1], -1)
      -- Its stale entries (a succeeded job retried once) now have no job: plain drops.
      if f[4] ~= '0' then redis.call('DECRBY', NS .. 'done:failed:stale', f[4]) end
      if INDEXED[f[1]] then redis.call('ZREM', NS .. 'state:' .. f[1], id) end
      -- The index of jobs a build before layout 3 wrote (a no-op for later jobs).
      redis.call('ZREM', NS .. 'jobs', id)
      redis.call('HSET', pk, id, f[1] .. '\t' .. (f[2] or '0') .. '\t' .. s(now) .. '\t' .. (f[3] or ''))
      redis.call('ZADD', tk, now, id)
      jobs = jobs + 1
    end
  end)
  if looked > 0 then redis.call('LTRIM', dk, looked, -1) end
end

-- The new tombstones are the newest: selecting after adding them keeps a count bound exact.
local n_tombs = selected(tk, ARGV[6], ARGV[7])
local tombs = 0
local take = math.min(n_tombs, limit)
if take > 0 then
  for _, id in ipairs(redis.call('ZRANGE', tk, 0, take - 1)) do
    local t = redis.call('HGET', pk, id)
    if t then
      local key = string.match(t, '^[^\t]*\t[^\t]*\t[^\t]*\t(.*)$')
      if key and key ~= '' and redis.call('HGET', NS .. 'idem', key) == id then
        redis.call('HDEL', NS .. 'idem', key)
      end
      redis.call('HDEL', pk, id)
    end
    redis.call('ZREM', tk, id)
    tombs = tombs + 1
  end
end
local more = 0
if why == 'budget' or n_tombs > limit then more = 1 end
return { jobs, tombs, more }
