-- Shared prelude of every skillforge Redis script (prepended by scripts.rs).
-- ARGV[1] is the key prefix "{namespace}:"; all keys are derived from it inside the
-- script, so this backend targets a standalone Redis (not Redis Cluster).
-- Every timestamp is the server's clock (TIME), in ms since the Unix epoch.
-- Job hashes are in layout 3 (see "The job hash" in redis.rs): short field names, every value
-- kept at most LONG bytes so that Redis stores the hash as a compact listpack; a longer payload,
-- spec extra, outcome or error is kept in its own string key `job:{id}:{field}` and the hash
-- field holds '@' (put_long / get_long). Older layouts are rewritten on open (migrate.rs).
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

-- Longest value kept in a job hash (Redis's default `hash-max-listpack-value`).
local LONG = 64

-- The value to store in hash field `field` (`p` payload, `x` spec extra, `o` outcome, `e` error)
-- of job `id` for `v`: `v` itself when short, else '@' with `v` written to the string key
-- `job:{id}:{field}` (a stale such key left by an earlier long value is unused; prune deletes it).
local function put_long(id, field, v)
  if #v > LONG then
    redis.call('SET', jkey(id) .. ':' .. field, v)
    return '@'
  end
  if v == '@' then error('a job field value of exactly "@" cannot be stored') end
  return v
end

-- The value of hash field `field` of job `id` as read (`v`), resolving '@' to its string key.
local function get_long(id, field, v)
  if v == '@' then return redis.call('GET', jkey(id) .. ':' .. field) end
  return v
end

-- Every key of job `id` (for DEL when it is pruned).
local function job_keys(id)
  local jk = jkey(id)
  return { jk, jk .. ':history', jk .. ':p', jk .. ':x', jk .. ':o', jk .. ':e', NS .. 'out:' .. id }
end

local function next_seq()
  return redis.call('INCR', NS .. 'seq')
end

-- States with an index set `state:{state}` (scored by creation time): the rare ones an operator
-- lists to find trouble. `queued` and `succeeded`, the states nearly every job passes through,
-- have none (keeping them cost a sorted-set entry per job): `list` in redis.rs finds queued
-- jobs in `ready:*` / `delayed:*` and succeeded ones in `done:succeeded` and `results`. Running
-- jobs are listed from the `leases` set.
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
  redis.call('HSET', jkey(id), 's', new)
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
  redis.call('HSET', jkey(id), 'nb', s(not_before))
  wake(queue)
end

-- Tells the change waiters of every process (`changed_since`, subscribed to the channel
-- `{ns}:changed` while they wait) that some job ended. A message without subscribers costs
-- nothing; one lost (a waiter between subscriptions) is caught by the waiter's fallback poll.
local function publish_changed()
  redis.call('PUBLISH', NS .. 'changed', '1')
end

-- Makes the job visible to pending_results (oldest first by seq), and tells the change waiters.
local function to_results(id)
  redis.call('ZADD', NS .. 'results', next_seq(), id)
  publish_changed()
end

-- The lease fields stay after an attempt ends (they describe the last attempt; `s` = running
-- says whether the lease is live): only the `leases` entry goes.
local function clear_lease(id)
  redis.call('ZREM', NS .. 'leases', id)
end

-- Most closed attempts the history list keeps (the oldest are dropped beyond it).
local HISTORY_CAP = 100

-- Appends the closed record of an attempt to the job's history list. A record is pushed only
-- when its attempt is superseded: at a non-terminal end (retry, stale, release), or when a
-- terminal job is retried (flush_closed); a terminally finished attempt stays in the job hash
-- (`r`). A running job's open attempt is its lease fields.
local function push_attempt(id, token, attempts, worker, host, pid, started, now, result, delay)
  local rec = { attempt = tonumber(attempts), fencing_token = tonumber(token), worker = worker,
    host = host, pid = tonumber(pid), started_at_ms = tonumber(started), ended_at_ms = now,
    result = result }
  if delay then rec.retry_delay_ms = delay end
  local hk = hkey(id)
  if redis.call('RPUSH', hk, cjson.encode(rec)) > HISTORY_CAP then redis.call('LTRIM', hk, -HISTORY_CAP, -1) end
end

-- Closes the attempt running under `token` into the history list (call before clear_lease).
local function end_attempt(id, token, now, result, delay)
  local f = redis.call('HMGET', jkey(id), 't', 'a', 'ow', 'oh', 'op', 'la')
  if f[1] ~= token or not f[3] then return end
  push_attempt(id, token, f[2], f[3], f[4], f[5], f[6], now, result, delay)
end

-- Moves the closed attempt the job hash holds (`r` non-empty: the last attempt ended
-- terminally; its record is the lease fields + `a`, `t`, ended at `u`) to the history list,
-- before anything supersedes it. No-op otherwise.
local function flush_closed(id)
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'r', 't', 'a', 'ow', 'oh', 'op', 'la', 'u')
  if not f[1] or f[1] == '' then return end
  if f[4] then push_attempt(id, f[2], f[3], f[4], f[5], f[6], f[7], tonumber(f[8]), f[1], nil) end
  redis.call('HSET', jk, 'r', '')
end

local TERMINAL = { succeeded = true, failed = true, dead = true, cancelled = true, stale = true }
