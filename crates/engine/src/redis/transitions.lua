-- Finish and lease as functions, shared by lease.lua and finish_batch.lua (prepended after
-- common.lua by scripts.rs).

-- Keys every batch touches, built once per call.
local K_LEASES = NS .. 'leases'
local K_QUEUED = NS .. 'state:queued'

-- Sorted-set writes of many jobs, deferred to one ZREM / ZADD per key (flush_sets): one
-- redis.call for a whole batch instead of one per job. Results get their sequence numbers
-- (pending_results order) at the flush, in the order they were deferred.
local function new_sets() return { add = {}, rem = {}, results = {} } end
local function defer_zadd(sets, key, score, member)
  local a = sets.add[key]
  if not a then a = {}; sets.add[key] = a end
  a[#a + 1] = score; a[#a + 1] = member
end
local function defer_zrem(sets, key, member)
  local r = sets.rem[key]
  if not r then r = {}; sets.rem[key] = r end
  r[#r + 1] = member
end
local function flush_sets(sets)
  for key, members in pairs(sets.rem) do redis.call('ZREM', key, unpack(members)) end
  local n = #sets.results
  if n > 0 then
    local base = redis.call('INCRBY', NS .. 'seq', n) - n
    for i, id in ipairs(sets.results) do defer_zadd(sets, NS .. 'results', base + i, id) end
  end
  for key, pairs_ in pairs(sets.add) do redis.call('ZADD', key, unpack(pairs_)) end
  sets.add, sets.rem, sets.results = {}, {}, {}
end

-- Applies one finished attempt, fenced on `token` (its sorted-set writes go to `sets`; flush
-- them before anything reads those sets). `delay` is the retry delay (ms, decimal text), `err`
-- is '' for no error, else '=' followed by the error text. `snow` is `now` as text.
-- Returns the new state when applied, '#' .. current_token when fenced, '' when missing.
local function finish_one(id, token, next, delay, result, outcome, err, now, snow, sets)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'token', 'created_at', 'cancel_requested', 'layout', 'error')
  if not f[1] then return '' end
  if f[1] ~= 'running' or f[2] ~= token then
    -- A retried call whose first try was applied (response lost) reports the same success.
    if f[2] == token then
      local c = redis.call('HMGET', jk, 'closed_token', 'closed_by')
      if c[1] == token and c[2] == 'finish' then return f[1] end
    end
    return '#' .. f[2]
  end
  -- A cancel request wins over a retry (same rule as the SQLite backend).
  if next == 'queued' and f[4] == '1' then next = 'cancelled' end
  local terminal = TERMINAL[next]
  local v2 = f[5] == '2'
  -- Layout 2 keeps a terminal attempt's record in the hash (`attempt_result` = its result, the
  -- lease fields stay as the last attempt's); any other closed attempt goes to the list now.
  local keep = v2 and terminal and result ~= ''
  local queue
  if not keep then
    local g = redis.call('HMGET', jk, 'queue', 'attempts', 'owner_worker', 'owner_host', 'owner_pid', 'acquired_at')
    queue = g[1]
    if g[3] then
      push_attempt(id, token, g[2], g[3], g[4], g[5], g[6], now, result, (not terminal) and tonumber(delay) or nil)
    end
  end
  local e = false
  if err ~= '' then e = string.sub(err, 2) end
  if v2 then
    -- One HSET: `outcome` '' = none; `error` is deleted only when an earlier attempt set it.
    local ar = keep and result or ''
    if e then
      redis.call('HSET', jk, 'state', next, 'updated_at', snow, 'closed_token', token, 'closed_by', 'finish',
        'outcome', outcome, 'attempt_result', ar, 'error', e)
    else
      redis.call('HSET', jk, 'state', next, 'updated_at', snow, 'closed_token', token, 'closed_by', 'finish',
        'outcome', outcome, 'attempt_result', ar)
      if f[6] then redis.call('HDEL', jk, 'error') end
    end
  else
    -- Layout 1: lease fields, and outcome/error when this attempt has none, in one HDEL; the
    -- rest in one HSET.
    local del = { 'owner_worker', 'owner_host', 'owner_pid', 'acquired_at', 'heartbeat_at' }
    local set = { 'updated_at', snow, 'closed_token', token, 'closed_by', 'finish', 'state', next }
    if outcome ~= '' then
      set[#set + 1] = 'outcome'; set[#set + 1] = outcome
    else
      del[#del + 1] = 'outcome'
    end
    if e then
      set[#set + 1] = 'error'; set[#set + 1] = e
    else
      del[#del + 1] = 'error'
    end
    redis.call('HDEL', jk, unpack(del))
    redis.call('HSET', jk, unpack(set))
  end
  defer_zrem(sets, K_LEASES, id)
  defer_zadd(sets, NS .. 'state:' .. next, f[3], id)
  if next == 'queued' then
    schedule(id, queue, next_seq(), now + tonumber(delay), now)
  elseif terminal then
    sets.results[#sets.results + 1] = id
  end
  return next
end

-- Moves up to `limit` due delayed jobs of `queue` to its ready set, in due order.
local function promote_due(queue, now, limit)
  local delayed = NS .. 'delayed:' .. queue
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, limit)
  if #due > 0 then
    local ready = NS .. 'ready:' .. queue
    local base = redis.call('INCRBY', NS .. 'seq', #due) - #due
    for i, id in ipairs(due) do
      redis.call('ZREM', delayed, id)
      redis.call('ZADD', ready, base + i, id)
    end
  end
end

-- Pops up to `max` ready jobs of `queue` (oldest first); returns ZPOPMIN's flat
-- {id, score, id, score, …} (ids at odd indexes).
local function pop_ready(queue, max)
  return redis.call('ZPOPMIN', NS .. 'ready:' .. queue, max)
end

-- LEASE ROW: what the client decodes into a leased `Job` (redis/decode.rs, `leased`), a flat
-- array: tag (the caller's: item index in finish_batch, '0' in lease), job id, spec JSON,
-- attempts, token, owner_worker, owner_host, owner_pid, acquired_at, heartbeat_at,
-- updated_at, not_before, created_at, cancel_requested (nil = 0), recovery_available
-- (nil = 0), outcome JSON (nil or '' = none), error (nil = none), then the job's history list
-- (closed attempts, JSON), read only when the token is above 1 (a first lease has none).
local ROW_FIXED = 17

local function append_history(row, id)
  local h = redis.call('LRANGE', hkey(id), 0, -1)
  for i = 1, #h do row[ROW_FIXED + i] = h[i] end
end

-- Leases one popped job for the worker: running, attempts + 1, token + 1, lease fields set
-- (which are also the open attempt record). Returns its lease row (built from what the
-- script read and wrote, no second read of the hash), or nil when the job is no longer queued.
local function lease_one(tag, id, worker, host, pid, now, snow, sets)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'token', 'stale_after', 'created_at', 'spec',
    'not_before', 'cancel_requested', 'recovery_available', 'outcome', 'error', 'attempt_result')
  if f[1] ~= 'queued' then return nil end
  -- Defensive: a closed attempt still held by a layout-2 hash is superseded now.
  if f[12] and f[12] ~= '' then flush_closed(id) end
  local token = tonumber(f[3]) + 1
  local attempts, stoken = s(tonumber(f[2]) + 1), s(token)
  redis.call('HSET', jk, 'state', 'running', 'attempts', attempts, 'token', stoken,
    'owner_worker', worker, 'owner_host', host, 'owner_pid', pid,
    'acquired_at', snow, 'heartbeat_at', snow, 'updated_at', snow)
  defer_zrem(sets, K_QUEUED, id)
  defer_zadd(sets, K_LEASES, s(now + tonumber(f[4])), id)
  local row = { tag, id, f[6], attempts, stoken, worker, host, pid, snow, snow, snow, f[7], f[5],
    f[8], f[9], f[10], f[11] }
  if token > 1 then append_history(row, id) end
  return row
end

-- The lease row of a job still running under `token` (text), for a retried lease request
-- whose first try leased it; nil when it is no longer running under that token.
local function current_row(tag, id, token)
  local f = redis.call('HMGET', jkey(id), 'state', 'token', 'spec', 'attempts', 'owner_worker', 'owner_host',
    'owner_pid', 'acquired_at', 'heartbeat_at', 'updated_at', 'not_before', 'created_at', 'cancel_requested',
    'recovery_available', 'outcome', 'error')
  if f[1] ~= 'running' or f[2] ~= token then return nil end
  local row = { tag, id, f[3], f[4], f[2], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13], f[14],
    f[15], f[16] }
  if token ~= '1' then append_history(row, id) end
  return row
end
