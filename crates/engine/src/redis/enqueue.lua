-- ARGV: ns, id, queue, idempotency_key ('' = none), max_attempts, heartbeat_ms, stale_after_ms,
--       idempotent (0/1), not_before_ms ('' = now), workflow, stage, kind, payload (JSON),
--       timeout_ms, extra (JSON of the spec's other non-default fields, '' = none: see spec.rs)
-- Returns {job_id, created (0/1)}. Safe to retry with the same id.
local id, queue, idem = ARGV[2], ARGV[3], ARGV[4]
if idem ~= '' then
  local existing = redis.call('HGET', NS .. 'idem', idem)
  if existing then
    if existing == id then return { id, 1 } end
    return { existing, 0 }
  end
end
local jk = jkey(id)
if redis.call('EXISTS', jk) == 1 then return { id, 1 } end

local now = now_ms()
local snow = s(now)
local not_before = now
if ARGV[9] ~= '' then not_before = tonumber(ARGV[9]) end
-- Layout 4 (see "The job hash" in redis.rs): hset leaves out every field at its default, so a
-- default no-op job stores `c` and `kd` only; `u` and `nb` default to `c`; `k` only with an
-- idempotency key, `x` only with extra spec fields.
local f = { 'c', snow, 'q', queue, 'm', ARGV[5], 'hb', ARGV[6], 'sa', ARGV[7], 'i', ARGV[8],
  'w', ARGV[10], 'g', ARGV[11], 'kd', ARGV[12], 'p', put_long(id, 'p', ARGV[13]), 'to', ARGV[14] }
if ARGV[15] ~= '' then f[#f + 1] = 'x'; f[#f + 1] = put_long(id, 'x', ARGV[15]) end
if idem ~= '' then
  f[#f + 1] = 'k'; f[#f + 1] = idem
  redis.call('HSET', NS .. 'idem', idem, id)
end
hset(jk, f, true)
metric('enqueued', queue, ARGV[10], ARGV[11], '', 1)
metric('depth', queue, '', '', 'queued', 1)
redis.call('SADD', NS .. 'queues', queue)
schedule(id, queue, not_before, now, now, false, true)
return { id, 1 }
