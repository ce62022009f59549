-- Shared prelude of every skillforge Redis script (prepended by scripts.rs).
-- ARGV[1] is the key prefix "{namespace}:"; all keys are derived from it inside the
-- script, so this backend targets a standalone Redis (not Redis Cluster).
-- Every timestamp is the server's clock (TIME), in ms since the Unix epoch.
-- Job hashes come in two layouts (see "The job hash" in redis.rs): layout 2 (`layout` = '2',
-- every job this build enqueues) keeps the last attempt's lease fields after it ends and a
-- terminal attempt's closed record in the hash (`attempt_result`); layout 1 (no `layout`,
-- written by older builds) pushes every closed attempt to the history list and deletes the
-- lease fields. Scripts branch on `layout` where the two differ.
local NS = ARGV[1]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integer-valued number to decimal text (no exponent, no fraction).
local function s(n)
  return string.format('%d', n)
end

local function jkey(id) return NS .. 'job:' .. id end
local function hkey(id) return NS .. 'job:' .. id .. ':history' end

local function next_seq()
  return redis.call('INCR', NS .. 'seq')
end

-- States with an index set `state:{state}` (scored by creation time): the rare ones an operator
-- lists to find trouble. `queued` and `succeeded`, the states nearly every job passes through,
-- have none (keeping them cost a sorted-set write at every enqueue, lease and finish); `list`
-- in redis.rs finds them by walking `jobs`. Running jobs are listed from the `leases` set.
local INDEXED = { failed = true, dead = true, cancelled = true, stale = true }

-- Retention classes of the terminal states (see crate::retention): an acknowledged terminal job
-- is in `done:{class}` (scored by finish time) until it is pruned or retried.
local RETAIN_CLASS = { succeeded = 'succeeded', failed = 'failed', dead = 'failed', cancelled = 'failed' }

-- Stores the state and moves the job between the index sets.
local function set_state(id, old, new, created)
  if old ~= new then
    if old and INDEXED[old] then redis.call('ZREM', NS .. 'state:' .. old, id) end
    if INDEXED[new] then redis.call('ZADD', NS .. 'state:' .. new, created, id) end
  end
  redis.call('HSET', jkey(id), 'state', new)
end

-- Wakes one idle waiter of the queue (the wake list is capped).
local function wake(queue)
  local w = NS .. 'wake:' .. queue
  redis.call('LPUSH', w, '1')
  redis.call('LTRIM', w, 0, 15)
end

-- Puts a queued job in the ready set (due now, FIFO by seq) or the delayed set (score = not_before).
local function schedule(id, queue, seq, not_before, now)
  if not_before <= now then
    redis.call('ZADD', NS .. 'ready:' .. queue, seq, id)
  else
    redis.call('ZADD', NS .. 'delayed:' .. queue, not_before, id)
  end
  redis.call('HSET', jkey(id), 'not_before', s(not_before))
  wake(queue)
end

-- Makes the job visible to pending_results (oldest first by seq).
local function to_results(id)
  redis.call('ZADD', NS .. 'results', next_seq(), id)
end

local function clear_lease(id)
  redis.call('HDEL', jkey(id), 'owner_worker', 'owner_host', 'owner_pid', 'acquired_at', 'heartbeat_at')
  redis.call('ZREM', NS .. 'leases', id)
end

-- Appends the closed record of the attempt that ran under `token` to the job's history list.
-- Layout 2 (see `layout` in redis.rs) pushes a record only when its attempt is superseded: at a
-- non-terminal end (retry, stale, release), or when a terminal job is retried (flush_closed);
-- a terminally finished attempt stays in the job hash. Layout 1 (no `layout` field) pushes
-- every closed attempt. A running job's open attempt is its lease fields in both layouts.
local function push_attempt(id, token, attempts, worker, host, pid, started, now, result, delay)
  local rec = { attempt = tonumber(attempts), fencing_token = tonumber(token), worker = worker,
    host = host, pid = tonumber(pid), started_at_ms = tonumber(started), ended_at_ms = now,
    result = result }
  if delay then rec.retry_delay_ms = delay end
  redis.call('RPUSH', hkey(id), cjson.encode(rec))
end

-- Closes the attempt running under `token` into the history list (call before clear_lease).
local function end_attempt(id, token, now, result, delay)
  local f = redis.call('HMGET', jkey(id), 'token', 'attempts', 'owner_worker', 'owner_host', 'owner_pid', 'acquired_at')
  if f[1] ~= token or not f[3] then return end
  push_attempt(id, token, f[2], f[3], f[4], f[5], f[6], now, result, delay)
end

-- Layout 2: moves the closed attempt the job hash holds (`attempt_result` non-empty: the last
-- attempt ended terminally; its record is the lease fields + `attempts`, `token`, ended at
-- `updated_at`) to the history list, before anything supersedes it. No-op otherwise.
local function flush_closed(id)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'attempt_result', 'token', 'attempts', 'owner_worker', 'owner_host',
    'owner_pid', 'acquired_at', 'updated_at')
  if not f[1] or f[1] == '' then return end
  if f[4] then push_attempt(id, f[2], f[3], f[4], f[5], f[6], f[7], tonumber(f[8]), f[1], nil) end
  redis.call('HSET', jk, 'attempt_result', '')
end

local TERMINAL = { succeeded = true, failed = true, dead = true, cancelled = true, stale = true }
