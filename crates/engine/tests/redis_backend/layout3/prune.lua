-- ARGV: ns, class ('succeeded' | 'failed'), limit, jobs_before_ms, jobs_keep_newest,
--       tombs_before_ms, tombs_keep_newest, count_only ('1' = count, remove nothing)
-- ('' = no such bound). See crate::retention.
-- Prunes at most `limit` jobs of `done:{class}` (acknowledged terminal jobs by finish time,
-- oldest first) selected by the job bounds: the job hash, its history list, output stream and
-- long-value keys, and its entries in
-- `jobs`, `state:{state}` and `done:{class}` go; a tombstone stays (`pruned` hash: id →
-- "state<TAB>finished_at<TAB>pruned_at<TAB>idem_key"; `pruned:{class}` set by prune time), and
-- the job's `idem` entry stays with it. Then prunes at most `limit` tombstones of the class
-- selected by the tombstone bounds (oldest prune first), freeing their idempotency keys.
-- A `done` entry whose job is missing, not terminal or has a pending result is dropped without
-- touching the job (it re-enters at its next acknowledgement).
-- At most ~9 key operations per job and 4 per tombstone, plus (until the backfill below is
-- done) 3 per backfilled entry: a call with limit 400 touches a few thousand keys.
-- Returns {jobs, tombstones, more (0/1)}; with count_only, {jobs, tombstones} selected now.
local class, limit = ARGV[2], tonumber(ARGV[3])
local dk = NS .. 'done:' .. class
local tk = NS .. 'pruned:' .. class
local pk = NS .. 'pruned'

-- How many of the oldest entries of sorted set `key` the bounds select.
local function selected(key, before, keep)
  local n = 0
  if before ~= '' then n = redis.call('ZCOUNT', key, '-inf', '(' .. before) end
  if keep ~= '' then
    local excess = redis.call('ZCARD', key) - tonumber(keep)
    if excess > n then n = excess end
  end
  return n
end

-- Backfill of a namespace written by a build before retention (its acknowledged jobs never
-- entered `done:*`): each call walks up to BACKFILL entries of `jobs` (oldest first, by
-- creation time, from the cursor `done:backfill`) and files every acknowledged terminal job it
-- finds; the cursor becomes 'done' at the end of `jobs` (one GET per call from then on). Jobs
-- acknowledged by this build are filed by `ack.lua`; filing one twice is harmless.
local BACKFILL = 1000
local bk = NS .. 'done:backfill'
local cursor = redis.call('GET', bk)
if cursor ~= 'done' and ARGV[8] ~= '1' then
  local from = cursor or '-inf'
  local rows = redis.call('ZRANGEBYSCORE', NS .. 'jobs', from, '+inf', 'WITHSCORES', 'LIMIT', 0, BACKFILL)
  for i = 1, #rows, 2 do
    local id = rows[i]
    local f = redis.call('HMGET', jkey(id), 's', 'u')
    local c = RETAIN_CLASS[f[1] or '']
    if c and not redis.call('ZSCORE', NS .. 'results', id) then
      redis.call('ZADD', NS .. 'done:' .. c, tonumber(f[2]) or 0, id)
    end
  end
  if #rows < 2 * BACKFILL then
    redis.call('SET', bk, 'done')
  else
    local first, last = tonumber(rows[2]), tonumber(rows[#rows])
    -- A whole call of one creation time cannot move an inclusive cursor: step past it.
    if last == first then last = last + 1 end
    redis.call('SET', bk, s(last))
  end
end

local n_jobs = selected(dk, ARGV[4], ARGV[5])
local n_tombs = selected(tk, ARGV[6], ARGV[7])
if ARGV[8] == '1' then return { n_jobs, n_tombs } end

local now = now_ms()
local jobs = 0
local take = math.min(n_jobs, limit)
if take > 0 then
  for _, id in ipairs(redis.call('ZRANGE', dk, 0, take - 1)) do
    local jk = jkey(id)
    local f = redis.call('HMGET', jk, 's', 'u', 'k')
    redis.call('ZREM', dk, id)
    if f[1] and RETAIN_CLASS[f[1]] == class and not redis.call('ZSCORE', NS .. 'results', id) then
      redis.call('DEL', unpack(job_keys(id)))
      redis.call('ZREM', NS .. 'jobs', id)
      if INDEXED[f[1]] then redis.call('ZREM', NS .. 'state:' .. f[1], id) end
      redis.call('HSET', pk, id, f[1] .. '\t' .. (f[2] or '0') .. '\t' .. s(now) .. '\t' .. (f[3] or ''))
      redis.call('ZADD', tk, now, id)
      jobs = jobs + 1
    end
  end
end

-- The new tombstones are the newest: selecting after adding them keeps a count bound exact.
n_tombs = selected(tk, ARGV[6], ARGV[7])
local tombs = 0
take = math.min(n_tombs, limit)
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
if n_jobs > limit or n_tombs > limit then more = 1 end
return { jobs, tombs, more }
