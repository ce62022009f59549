-- ARGV: ns, job_id. Returns {'ok'} | {'invalid', state} | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = redis.call('HMGET', jk, 'state', 'queue', 'created_at')
if not f[1] then return { 'missing' } end
local st = f[1]
if st ~= 'failed' and st ~= 'dead' and st ~= 'cancelled' and st ~= 'stale' then
  return { 'invalid', st }
end
-- The attempt record a layout-2 hash holds is superseded now: move it to the history list.
flush_closed(id)
local now = now_ms()
redis.call('HSET', jk, 'attempts', '0', 'cancel_requested', '0', 'recovery_available', '0', 'updated_at', s(now))
redis.call('ZREM', NS .. 'results', id)
if RETAIN_CLASS[st] then redis.call('ZREM', NS .. 'done:' .. RETAIN_CLASS[st], id) end
set_state(id, st, 'queued', f[3])
schedule(id, f[2], next_seq(), now, now)
return { 'ok' }
