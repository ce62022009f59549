-- Shared prelude of every skillforge Redis script (prepended by scripts.rs).
-- ARGV[1] is the key prefix "{namespace}:"; all keys are derived from it inside the
-- script, so this backend targets a standalone Redis (not Redis Cluster).
-- Every timestamp is the server's clock (TIME), in ms since the Unix epoch.
-- Job hashes are in layout 4 (see "The job hash" in redis.rs): short field names, every value
-- kept at most LONG bytes so that Redis stores the hash as a compact listpack; a longer payload,
-- spec extra, outcome or error is kept in its own string key `job:{id}:{field}` and the hash
-- field holds '@' (put_long / get_long). A field at its default (DEFAULTS, RELATIVE: rendered
-- from redis/defaults.rs before this prelude) is not stored: read job fields with hmget and
-- write them with hset, never with raw HMGET / HSET (the exceptions, on the lease's and the
-- finish's hot paths in transitions.lua, write only values known not to be defaults and delete
-- what goes back to one). Older layouts are rewritten on open
-- (migrate.rs).
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

-- A read plan of job fields (plan(...) once per script, hmget(jk, plan) per job): the fields to
-- HMGET, then PRESENT (absent = no such job), then the sources of the relative defaults asked.
local function plan(...)
  local names = { ... }
  local ask, src = {}, {}
  for i, n in ipairs(names) do ask[i] = n end
  ask[#ask + 1] = PRESENT
  for i, n in ipairs(names) do
    local r = RELATIVE[n]
    if r then ask[#ask + 1] = r; src[i] = #ask end
  end
  return { names = names, n = #names, ask = ask, src = src }
end

-- Adds to plan `p` fields read as stored (absent = false: no default filled in, for a reader
-- that applies them itself), after its own; `p.raw` is the index of the first in what hmget
-- returns.
local function with_raw(p, ...)
  p.raw = #p.ask + 1
  for _, n in ipairs({ ... }) do p.ask[#p.ask + 1] = n end
  return p
end

-- The plan's fields of the job hash `jk`, each absent one at its default (a field without a
-- default: false). An empty table when the job does not exist.
local function hmget(jk, p)
  local f = redis.call('HMGET', jk, unpack(p.ask))
  if not f[p.n + 1] then return {} end
  for i = 1, p.n do
    if not f[i] then
      local name = p.names[i]
      local d = DEFAULTS[name]
      if d then
        f[i] = d
      elseif p.src[i] then
        f[i] = f[p.src[i]] or DEFAULTS[RELATIVE[name]] or false
      end
    end
  end
  return f
end

-- Writes job fields (flat name, value pairs): a value equal to the field's default, or false
-- (= its relative default), deletes the field instead (nothing to delete in a `fresh` hash).
local function hset(jk, t, fresh)
  local set, del = {}, {}
  for i = 1, #t, 2 do
    local name, v = t[i], t[i + 1]
    if v == false or v == DEFAULTS[name] then del[#del + 1] = name else set[#set + 1] = name; set[#set + 1] = v end
  end
  if #set > 0 then redis.call('HSET', jk, unpack(set)) end
  if #del > 0 and not fresh then redis.call('HDEL', jk, unpack(del)) end
end
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
-- is in the list `done:{class}` (in acknowledgement order) until it is pruned. Done lists are
-- lazy like ready lists: retrying an acknowledged job (failed, dead or cancelled: class
-- `failed`) leaves its `done:failed` entry behind, counted in the job's `sd` and in
-- `done:failed:stale`; prune.lua drops such entries.
local RETAIN_CLASS = { succeeded = 'succeeded', failed = 'failed', dead = 'failed', cancelled = 'failed' }

-- Counters of `/metrics` (issue 36 item 2), kept in the hash `metrics` by the script of each
-- transition: field `name US queue US workflow US stage US outcome US le` (US = byte 31) holds
-- the count, a histogram bucket's field + US 'sum' its ms (metrics.rs: the names and buckets;
-- sqlite/migrations/0009_metrics.sql: their meaning). `seeded` marks a namespace whose depth
-- was counted (metrics_seed.lua).
local K_METRICS = NS .. 'metrics'
local US = '\31'
local function metric(name, queue, wf, st, outcome, n)
  redis.call('HINCRBY', K_METRICS, name .. US .. queue .. US .. wf .. US .. st .. US .. outcome .. US .. '0', n)
end
local BUCKETS_MS = { 10, 100, 1000, 5000, 30000, 120000, 600000, 3600000 }
local function observe(name, queue, wf, st, ms)
  if ms < 0 then ms = 0 end
  local le = -1
  for _, b in ipairs(BUCKETS_MS) do
    if ms <= b then le = b; break end
  end
  local f = name .. US .. queue .. US .. wf .. US .. st .. US .. US .. s(le)
  redis.call('HINCRBY', K_METRICS, f, 1)
  redis.call('HINCRBY', K_METRICS, f .. US .. 'sum', ms)
end
local FINAL = { succeeded = true, failed = true, dead = true, cancelled = true, stale = true }
-- Counts a job's move from state `old` to `new` (depth; `finished` into a final state; the
-- attempt's run time when it leaves `running`, `la` its start, `now` the time). A start that is
-- missing or does not parse (an unreadable record) is not observed: counting never fails a
-- transition.
local function count_move(queue, wf, st, old, new, la, now)
  if old == new then return end
  if old then metric('depth', queue, '', '', old, -1) end
  metric('depth', queue, '', '', new, 1)
  if FINAL[new] then metric('finished', queue, wf, st, new, 1) end
  local started = la and tonumber(la)
  if old == 'running' and started then observe('run_ms', queue, wf, st, now - started) end
end

-- Stores the state and moves the job between the index sets.
local function set_state(id, old, new, created)
  if old ~= new then
    if old and INDEXED[old] then redis.call('ZREM', NS .. 'state:' .. old, id) end
    if INDEXED[new] then redis.call('ZADD', NS .. 'state:' .. new, created, id) end
    local m = redis.call('HMGET', jkey(id), 'q', 'w', 'g', 'la')
    count_move(m[1] or DEFAULTS.q, m[2] or DEFAULTS.w, m[3] or DEFAULTS.g, old, new, m[4], now_ms())
  end
  hset(jkey(id), { 's', new })
end

-- Wakes one idle waiter of the queue (the wake list is capped).
local function wake(queue)
  local w = NS .. 'wake:' .. queue
  redis.call('LPUSH', w, '1')
  redis.call('LTRIM', w, 0, 15)
end

-- Puts a queued job in its queue's ready list when due (at the tail: FIFO; at the head with
-- `front`, for a job handed back), else in the delayed set (score = not_before), and stores
-- not_before (`nb`, left out when it is the creation time `created`; `fresh`: a new hash).
--
-- Ready lists are lazy: a queued job that leaves its list without being popped (a cancel) leaves
-- its entry behind and counts it in `sr`; the lease skips such entries (pop_ready). A job's
-- entries are in one list (its queue) and a stale one is always ahead of a live one: a job
-- requeued after a cancel goes to the tail, and one handed back to the head was running, so
-- none of its entries was left.
local function schedule(id, queue, not_before, now, created, front, fresh)
  if not_before <= now then
    redis.call(front and 'LPUSH' or 'RPUSH', NS .. 'ready:' .. queue, id)
  else
    redis.call('ZADD', NS .. 'delayed:' .. queue, not_before, id)
  end
  local nb = false
  if tonumber(created) ~= not_before then nb = s(not_before) end
  hset(jkey(id), { 'nb', nb }, fresh)
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
local P_ATTEMPT = plan('t', 'a', 'ow', 'oh', 'op', 'la')
local function end_attempt(id, token, now, result, delay)
  local f = hmget(jkey(id), P_ATTEMPT)
  if f[1] ~= token or not f[3] then return end
  push_attempt(id, token, f[2], f[3], f[4], f[5], f[6], now, result, delay)
end

-- Moves the closed attempt the job hash holds (`r` non-empty: the last attempt ended
-- terminally; its record is the lease fields + `a`, `t`, ended at `u`) to the history list,
-- before anything supersedes it. No-op otherwise.
local P_CLOSED = plan('r', 't', 'a', 'ow', 'oh', 'op', 'la', 'u')
local function flush_closed(id)
  local jk = jkey(id)
  local f = hmget(jk, P_CLOSED)
  if not f[1] or f[1] == '' then return end
  if f[4] then push_attempt(id, f[2], f[3], f[4], f[5], f[6], f[7], tonumber(f[8]), f[1], nil) end
  hset(jk, { 'r', '' })
end

-- How long (ms) the record of a lease request (`leasereq:{id}`: the jobs it leased, so a retry
-- after a lost reply gets the same jobs) lives: well past the longest a client keeps retrying one
-- call (RETRY_BUDGET after a first try of at most RESPONSE_TIMEOUT, redis.rs). A client also
-- deletes it sooner, once the reply arrived (forget_requests).
local LEASE_REQUEST_TTL_MS = 120000

-- Deletes the records of the lease requests whose replies the client received: ARGV[at] is
-- their count, their ids follow.
local function forget_requests(at)
  local n = tonumber(ARGV[at] or '0')
  if n > 0 then
    local keys = {}
    for i = 1, n do keys[i] = NS .. 'leasereq:' .. ARGV[at + i] end
    redis.call('UNLINK', unpack(keys))
  end
end

local TERMINAL = { succeeded = true, failed = true, dead = true, cancelled = true, stale = true }
