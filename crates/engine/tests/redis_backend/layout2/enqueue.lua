-- ARGV: ns, id, queue, spec_json, idempotency_key ('' = none), max_attempts, heartbeat_ms,
--       stale_after_ms, idempotent (0/1), not_before_ms ('' = now)
-- Returns {job_id, created (0/1)}. Safe to retry with the same id.
local id, queue, spec, idem = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if idem ~= '' then
  local existing = redis.call('HGET', NS .. 'idem', idem)
  if existing then
    if existing == id then return { id, 1 } end
    return { existing, 0 }
  end
end
if redis.call('EXISTS', jkey(id)) == 1 then return { id, 1 } end

local now = now_ms()
local not_before = now
if ARGV[10] ~= '' then not_before = tonumber(ARGV[10]) end
local seq = next_seq()
-- `layout` 2: the last closed attempt stays in the hash (see push_attempt in common.lua).
-- `cancel_requested` / `recovery_available` are absent until set (absent = '0').
redis.call('HSET', jkey(id),
  'queue', queue, 'spec', spec, 'state', 'queued',
  'attempts', '0', 'max_attempts', ARGV[6], 'token', '0', 'seq', s(seq),
  'heartbeat_ms', ARGV[7], 'stale_after', ARGV[8], 'idempotent', ARGV[9],
  'created_at', s(now), 'updated_at', s(now), 'layout', '2')
if idem ~= '' then
  redis.call('HSET', jkey(id), 'idem_key', idem)
  redis.call('HSET', NS .. 'idem', idem, id)
end
redis.call('ZADD', NS .. 'jobs', now, id)
set_state(id, nil, 'queued', now)
schedule(id, queue, seq, not_before, now)
return { id, 1 }
