-- Finish and lease as functions, shared by lease.lua and finish_batch.lua (prepended after
-- common.lua by scripts.rs).

-- Keys every batch touches, built once per call; `state:{state}` keys on first use.
local K_LEASES = NS .. 'leases'
local K_STATE = {}
local function state_key(st)
  local k = K_STATE[st]
  if not k then k = NS .. 'state:' .. st; K_STATE[st] = k end
  return k
end

-- Decimal text of x + 1 for a decimal text x, memoized per call (attempts and tokens are
-- mostly the same few small numbers; number formatting is a large part of a script's cost).
local INC = {}
local function inc(x)
  local r = INC[x]
  if not r then r = s(tonumber(x) + 1); INC[x] = r end
  return r
end

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
    for i, id in ipairs(sets.results) do defer_zadd(sets, NS .. 'results', s(base + i), id) end
    -- One message for the whole batch (see publish_changed).
    publish_changed()
  end
  for key, pairs_ in pairs(sets.add) do redis.call('ZADD', key, unpack(pairs_)) end
  sets.add, sets.rem, sets.results = {}, {}, {}
end

-- Applies one finished attempt, fenced on `token` (its sorted-set writes go to `sets`; flush
-- them before anything reads those sets). `delay` is the retry delay (ms, decimal text), `err`
-- is '' for no error, else '=' followed by the error text. `snow` is `now` as text.
-- Returns the new state when applied, '#' .. current_token when fenced, '' when missing.
local P_FINISH = plan('s', 't', 'c', 'ct', 'cb', 'o', 'e', 'r', 'q', 'w', 'g', 'la')
local P_CLOSER = plan('ct', 'cb')
local P_REQUEUE = plan('cr', 'q', 'a', 'ow', 'oh', 'op', 'la')
local function finish_one(id, token, next, delay, result, outcome, err, now, snow, sets)
  local jk = jkey(id)
  local f = hmget(jk, P_FINISH)
  if not f[1] then return '' end
  if f[1] ~= 'running' or f[2] ~= token then
    -- A retried call whose first try was applied (response lost) reports the same success.
    if f[2] == token then
      local c = hmget(jk, P_CLOSER)
      if c[1] == token and c[2] == 'finish' then return f[1] end
    end
    metric('fencing_rejections', '', '', '', '', 1)
    return '#' .. f[2]
  end
  -- What a retry needs besides (a terminal finish reads nothing more).
  local g
  if next == 'queued' then
    g = hmget(jk, P_REQUEUE)
    -- A cancel request wins over a retry (same rule as the SQLite backend).
    if g[1] == '1' then next = 'cancelled' end
  end
  local terminal = TERMINAL[next]
  -- A terminal attempt's record stays in the hash (`r` = its result, the lease fields stay as
  -- the last attempt's); any other closed attempt goes to the list now.
  local keep = terminal and result ~= ''
  if not keep then
    if not g then g = hmget(jk, P_REQUEUE) end
    if g[4] then
      push_attempt(id, token, g[3], g[4], g[5], g[6], g[7], now, result, (not terminal) and tonumber(delay) or nil)
    end
  end
  -- One write of what changes. `o` '' = none; `e` is stored as sent: '' = none, '=' .. text
  -- (either '@' when long). The closing call is this finish of the current token: `ct` and `cb`
  -- at their defaults. A field back at its default is deleted only when the hash holds another
  -- value (f: the values read, defaults filled in), so a first attempt's finish is one HSET.
  local set, del = { 'u', snow }, {}
  local function put(name, v, cur)
    if v ~= DEFAULTS[name] then set[#set + 1] = name; set[#set + 1] = v
    elseif cur ~= v then del[#del + 1] = name end
  end
  put('s', next, f[1])
  put('o', put_long(id, 'o', outcome), f[6])
  put('e', put_long(id, 'e', err), f[7])
  put('r', keep and result or '', f[8])
  if f[4] ~= token then del[#del + 1] = 'ct' end
  if f[5] ~= 'finish' then del[#del + 1] = 'cb' end
  redis.call('HSET', jk, unpack(set))
  if #del > 0 then redis.call('HDEL', jk, unpack(del)) end
  defer_zrem(sets, K_LEASES, id)
  count_move(f[9], f[10], f[11], 'running', next, f[12], now)
  if next == 'queued' then metric('retries', f[9], '', '', '', 1) end
  if INDEXED[next] then defer_zadd(sets, state_key(next), f[3], id) end
  if next == 'queued' then
    schedule(id, g[2], now + tonumber(delay), now, f[3], false)
  elseif terminal then
    sets.results[#sets.results + 1] = id
  end
  return next
end

-- Moves up to `limit` due delayed jobs of `queue` to the tail of its ready list, in due order.
local function promote_due(queue, now, limit)
  local delayed = NS .. 'delayed:' .. queue
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, limit)
  if #due > 0 then
    redis.call('ZREM', delayed, unpack(due))
    redis.call('RPUSH', NS .. 'ready:' .. queue, unpack(due))
  end
end

-- Most entries one pop_ready call looks at beyond `max` (stale entries it skips, see schedule).
local POP_SKIP = 1000

-- Pops up to `max` ready jobs of `queue` (oldest first) and calls take(id) on each until `max`
-- of them were taken (take returns whether it took the job: false for a stale entry, which is
-- dropped). Looks at most max + POP_SKIP entries.
local function pop_ready(queue, max, take)
  local key = NS .. 'ready:' .. queue
  local taken, looked = 0, 0
  while taken < max and looked < max + POP_SKIP do
    local ids = redis.call('LPOP', key, max - taken)
    if not ids then return end
    for _, id in ipairs(ids) do
      looked = looked + 1
      if take(id) then taken = taken + 1 end
    end
  end
end

-- LEASE ROW: what the client decodes into a leased `Job` (redis/decode.rs, `leased`), a flat
-- array: tag (the caller's: the finished job's id in finish_batch, '' in lease), job id,
-- attempts, token, not_before, created_at, cancel_requested (nil = 0), recovery_available
-- (nil = 0), outcome JSON (nil or '' = none), error (nil = none, else the text), acquired_at,
-- heartbeat_at, updated_at (these three nil = the script's `now`, as for every job it leases
-- itself), then the spec fields as stored (SPEC_FIELDS: queue, workflow, stage, kind, payload
-- JSON, idempotency key (nil = none), max_attempts, timeout_ms, heartbeat_ms, stale_after,
-- idempotent, extra JSON (nil = none); any other nil = its default, filled in by the client
-- from the same table, redis/defaults.rs), then the job's history list (closed attempts, JSON),
-- read only when the token is above 1 (a first lease has none). The owner is the worker the
-- call leased for (the lessee of the tagged item in finish_batch, the caller in lease).
local ROW_FIXED = 25
local SPEC_FIELDS = { 'q', 'w', 'g', 'kd', 'p', 'k', 'm', 'to', 'hb', 'sa', 'i', 'x' }

-- Appends the spec fields to `row` from `f[at..]`, an HMGET of SPEC_FIELDS (a long payload or
-- extra read from its own key).
local function append_spec(row, id, f, at)
  for i = 1, #SPEC_FIELDS do row[13 + i] = f[at + i - 1] or false end
  row[18] = get_long(id, 'p', row[18]) or false
  row[25] = get_long(id, 'x', row[25]) or false
end

local function append_history(row, id)
  local h = redis.call('LRANGE', hkey(id), 0, -1)
  for i = 1, #h do row[ROW_FIXED + i] = h[i] end
end

-- The `e` field as a lease row carries it: stored '' = none, '=' .. text, '@' = in its key.
local function row_error(id, e)
  e = get_long(id, 'e', e)
  if not e or e == '' then return false end
  return string.sub(e, 2)
end

-- Heartbeat deadlines (`leases` scores) per stale_after (text), memoized per call.
local DEADLINE = {}

-- Leases one popped job for the worker: running, attempts + 1, token + 1, lease fields set
-- (which are also the open attempt record). Returns its lease row (built from what the
-- script read and wrote, no second read of the hash), or nil when the job is no longer queued.
-- A queued job holds no closed attempt in its hash (retry.lua moves it to the list before
-- requeueing) and has recovery_available 0 (only a stale job has it set).
local P_LEASE = with_raw(plan('s', 'a', 't', 'sa', 'c', 'nb', 'cr', 'o', 'e', 'sr', 'q', 'w', 'g'), unpack(SPEC_FIELDS))
local function lease_one(tag, id, worker, host, pid, now, snow, sets)
  local jk = jkey(id)
  local f = hmget(jk, P_LEASE)
  if not f[1] then return nil end
  if f[10] ~= '0' then
    -- A stale entry of this job, left by a cancel (see schedule): its live one, if any, is
    -- further back.
    hset(jk, { 'sr', s(tonumber(f[10]) - 1) })
    return nil
  end
  if f[1] ~= 'queued' then return nil end
  local attempts, token = inc(f[2]), inc(f[3])
  -- None of these values is a default (an attempt and a token are at least 1). The heartbeat
  -- starts at the lease (`hh` at its default `la`); under token 1 (the first lease ever) no
  -- `hh` is stored yet.
  redis.call('HSET', jk, 's', 'running', 'a', attempts, 't', token, 'ow', worker, 'oh', host, 'op', pid,
    'la', snow, 'u', snow)
  if token ~= '1' then redis.call('HDEL', jk, 'hh') end
  count_move(f[11], f[12], f[13], 'queued', 'running', nil, now)
  metric('started', f[11], f[12], f[13], '', 1)
  local due = tonumber(f[6])
  if due then observe('wait_ms', f[11], f[12], f[13], now - due) end
  local dl = DEADLINE[f[4]]
  if not dl then dl = s(now + tonumber(f[4])); DEADLINE[f[4]] = dl end
  defer_zadd(sets, K_LEASES, dl, id)
  local row = { tag, id, attempts, token, f[6], f[5], f[7] or false, false, get_long(id, 'o', f[8]) or false,
    row_error(id, f[9]), false, false, false }
  append_spec(row, id, f, P_LEASE.raw)
  if token ~= '1' then append_history(row, id) end
  return row
end

-- The lease row of a job still running under `token` (text), for a retried lease request
-- whose first try leased it; nil when it is no longer running under that token.
local P_CURRENT = plan('s', 't', 'a', 'nb', 'c', 'cr', 'ra', 'o', 'e', 'la', 'hh', 'u', unpack(SPEC_FIELDS))
local function current_row(tag, id, token)
  local f = hmget(jkey(id), P_CURRENT)
  if f[1] ~= 'running' or f[2] ~= token then return nil end
  local row = { tag, id, f[3], f[2], f[4], f[5], f[6] or false, f[7] or false, get_long(id, 'o', f[8]) or false,
    row_error(id, f[9]), f[10], f[11], f[12] }
  append_spec(row, id, f, 13)
  if token ~= '1' then append_history(row, id) end
  return row
end
