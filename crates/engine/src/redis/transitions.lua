-- Finish and lease as functions, shared by lease.lua and finish_batch.lua (prepended after
-- common.lua by scripts.rs).

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
-- them before anything reads those sets). Returns {'applied', state} |
-- {'fenced', current_token} | {'missing'}.
local function finish_one(id, token, next, delay, result, outcome, has_error, err, now, sets)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'token', 'queue', 'created_at', 'closed_token', 'closed_by',
    'cancel_requested', 'attempts', 'owner_worker', 'owner_host', 'owner_pid', 'acquired_at')
  if not f[1] then return { 'missing' } end
  if f[1] ~= 'running' or f[2] ~= token then
    -- A retried call whose first try was applied (response lost) reports the same success.
    if f[2] == token and f[5] == token and f[6] == 'finish' then return { 'applied', f[1] } end
    return { 'fenced', f[2] }
  end
  -- A cancel request wins over a retry (same rule as the SQLite backend).
  if next == 'queued' and f[7] == '1' then next = 'cancelled' end
  push_attempt(id, token, f[8], f[9], f[10], f[11], f[12], now, result, next == 'queued' and delay or nil)
  -- Lease fields, and outcome/error when this attempt has none, in one HDEL; the rest in one HSET.
  local del = { 'owner_worker', 'owner_host', 'owner_pid', 'acquired_at', 'heartbeat_at' }
  local set = { 'updated_at', s(now), 'closed_token', token, 'closed_by', 'finish', 'state', next }
  if outcome ~= '' then
    set[#set + 1] = 'outcome'; set[#set + 1] = outcome
  else
    del[#del + 1] = 'outcome'
  end
  if has_error == '1' then
    set[#set + 1] = 'error'; set[#set + 1] = err
  else
    del[#del + 1] = 'error'
  end
  redis.call('HDEL', jk, unpack(del))
  redis.call('HSET', jk, unpack(set))
  defer_zrem(sets, NS .. 'leases', id)
  defer_zadd(sets, NS .. 'state:' .. next, f[4], id)
  if next == 'queued' then
    schedule(id, f[3], next_seq(), now + delay, now)
  elseif TERMINAL[next] then
    sets.results[#sets.results + 1] = id
  end
  return { 'applied', next }
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

-- Pops up to `max` ready jobs of `queue` (oldest first); returns {id, …}.
local function pop_ready(queue, max)
  local popped = redis.call('ZPOPMIN', NS .. 'ready:' .. queue, max)
  local ids = {}
  for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
  return ids
end

-- Leases one popped job for the worker: running, attempts + 1, token + 1, lease set (which is
-- also the open attempt record). Returns the new token, or nil when the job is no longer queued.
local function lease_one(id, worker, host, pid, now, sets)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'token', 'stale_after', 'created_at')
  if f[1] ~= 'queued' then return nil end
  local attempts = tonumber(f[2]) + 1
  local token = tonumber(f[3]) + 1
  redis.call('HSET', jk, 'state', 'running', 'attempts', s(attempts), 'token', s(token),
    'owner_worker', worker, 'owner_host', host, 'owner_pid', pid,
    'acquired_at', s(now), 'heartbeat_at', s(now), 'updated_at', s(now))
  defer_zrem(sets, NS .. 'state:queued', id)
  defer_zadd(sets, NS .. 'leases', s(now + tonumber(f[4])), id)
  return token
end

-- The lease reply of a job just leased under `token`: {HGETALL, closed attempts}. A first
-- lease has no closed attempt, so its (empty) history is not read.
local function leased_view(id, token)
  if token == 1 then return { redis.call('HGETALL', jkey(id)), {} } end
  return job_view(id)
end
