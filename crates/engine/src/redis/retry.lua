-- ARGV: ns, job_id[, payload JSON: replaces the job's `p` field]. Returns {'ok'} | {'invalid', state} | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = hmget(jk, plan('s', 'q', 'c', 'sd'))
if not f[1] then return { 'missing' } end
local st = f[1]
if st ~= 'failed' and st ~= 'dead' and st ~= 'cancelled' and st ~= 'stale' then
  return { 'invalid', st }
end
-- The attempt record the hash holds is superseded now: move it to the history list.
flush_closed(id)
local now = now_ms()
local sd = f[4]
-- A pending result is dropped; an acknowledged one leaves its `done:{class}` entry behind (lazy,
-- see RETAIN_CLASS in common.lua), counted in the job's `sd` and the list's stale count.
if redis.call('ZREM', NS .. 'results', id) == 0 and RETAIN_CLASS[st] then
  sd = s(tonumber(sd) + 1)
  redis.call('INCR', NS .. 'done:' .. RETAIN_CLASS[st] .. ':stale')
end
hset(jk, { 'a', '0', 'cr', '0', 'ra', '0', 'u', s(now), 'sd', sd })
if ARGV[3] and ARGV[3] ~= '' then hset(jk, { 'p', ARGV[3] }) end
set_state(id, st, 'queued', f[3])
schedule(id, f[2], now, now, f[3], false)
return { 'ok' }
