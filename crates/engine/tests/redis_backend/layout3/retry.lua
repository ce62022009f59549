-- ARGV: ns, job_id. Returns {'ok'} | {'invalid', state} | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = redis.call('HMGET', jk, 's', 'q', 'c')
if not f[1] then return { 'missing' } end
local st = f[1]
if st ~= 'failed' and st ~= 'dead' and st ~= 'cancelled' and st ~= 'stale' then
  return { 'invalid', st }
end
-- The attempt record the hash holds is superseded now: move it to the history list.
flush_closed(id)
local now = now_ms()
redis.call('HSET', jk, 'a', '0', 'cr', '0', 'ra', '0', 'u', s(now))
redis.call('ZREM', NS .. 'results', id)
if RETAIN_CLASS[st] then redis.call('ZREM', NS .. 'done:' .. RETAIN_CLASS[st], id) end
set_state(id, st, 'queued', f[3])
schedule(id, f[2], next_seq(), now, now)
return { 'ok' }
