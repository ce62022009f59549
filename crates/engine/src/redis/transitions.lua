-- Finish and lease as functions, shared by finish.lua, lease.lua and finish_batch.lua
-- (prepended after common.lua by scripts.rs).

-- Applies one finished attempt, fenced on `token`. Returns {'applied', state} |
-- {'fenced', current_token} | {'missing'}.
local function finish_one(id, token, next, delay, result, outcome, has_error, err, now)
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
  redis.call('ZREM', NS .. 'leases', id)
  redis.call('HSET', jk, unpack(set))
  redis.call('ZADD', NS .. 'state:' .. next, f[4], id)
  if next == 'queued' then
    schedule(id, f[3], next_seq(), now + delay, now)
  elseif TERMINAL[next] then
    to_results(id)
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
local function lease_one(id, worker, host, pid, now)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'token', 'stale_after', 'created_at')
  if f[1] ~= 'queued' then return nil end
  local attempts = tonumber(f[2]) + 1
  local token = tonumber(f[3]) + 1
  redis.call('HSET', jk, 'state', 'running', 'attempts', s(attempts), 'token', s(token),
    'owner_worker', worker, 'owner_host', host, 'owner_pid', pid,
    'acquired_at', s(now), 'heartbeat_at', s(now), 'updated_at', s(now))
  redis.call('ZREM', NS .. 'state:queued', id)
  redis.call('ZADD', NS .. 'leases', s(now + tonumber(f[4])), id)
  return token
end

-- The lease reply of a job just leased under `token`: {HGETALL, closed attempts}. A first
-- lease has no closed attempt, so its (empty) history is not read.
local function leased_view(id, token)
  if token == 1 then return { redis.call('HGETALL', jkey(id)), {} } end
  return job_view(id)
end
