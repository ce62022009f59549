-- ARGV: ns, job_id, outcome (encoded as the hash's `o`). Fails a queued job without running it
-- (the placement deadline): state failed with that outcome, a pending result. Returns {'failed'}
-- | {'not_queued', state} | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = hmget(jk, plan('s', 'q', 'c', 't', 'sr'))
if not f[1] then return { 'missing' } end
if f[1] ~= 'queued' then return { 'not_queued', f[1] } end
local now = now_ms()
local token = f[4]
local sr = f[5]
-- Out of its delayed set, or its ready list entry left behind and counted (as cancel.lua does).
if redis.call('ZREM', NS .. 'delayed:' .. f[2], id) == 0 then
  sr = s(tonumber(sr) + 1)
end
flush_closed(id)
set_state(id, 'queued', 'failed', f[3])
-- A job leased before may have a result applied under its current token: this is a new one.
if token ~= '0' then token = s(tonumber(token) + 1) end
hset(jk, { 'u', s(now), 'ra', '0', 't', token, 'sr', sr, 'o', put_long(id, 'o', ARGV[3]), 'e', '' })
to_results(id)
return { 'failed' }
