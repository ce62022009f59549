-- Shared prelude of every skillforge Redis script (prepended by scripts.rs).
-- ARGV[1] is the key prefix "{namespace}:"; all keys are derived from it inside the
-- script, so this backend targets a standalone Redis (not Redis Cluster).
-- Every timestamp is the server's clock (TIME), in ms since the Unix epoch.
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

-- Moves a job between the per-state index sets (scored by creation time) and stores the state.
local function set_state(id, old, new, created)
  if old ~= new then
    if old then redis.call('ZREM', NS .. 'state:' .. old, id) end
    redis.call('ZADD', NS .. 'state:' .. new, created, id)
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

-- Closes the current attempt record (the last one) when it ran under `token`.
local function end_attempt(id, token, now, result, delay)
  local h = hkey(id)
  local raw = redis.call('LINDEX', h, -1)
  if not raw then return end
  local rec = cjson.decode(raw)
  if s(tonumber(rec.fencing_token)) ~= token then return end
  rec.ended_at_ms = now
  rec.result = result
  if delay then rec.retry_delay_ms = delay end
  redis.call('LSET', h, -1, cjson.encode(rec))
end

-- {HGETALL of the job, its history list}.
local function job_view(id)
  return { redis.call('HGETALL', jkey(id)), redis.call('LRANGE', hkey(id), 0, -1) }
end

local TERMINAL = { succeeded = true, failed = true, dead = true, cancelled = true, stale = true }
