-- ARGV: ns, job_id, fencing_token, reason. Puts a terminal job whose result is pending under that
-- token back in the queue instead of having its result applied (its outputs expired before
-- ingestion, issue 32 item 6): due now, attempts kept, error = reason. Returns {'queued'} |
-- {'fenced'} (another token, or the result not pending) | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = hmget(jk, plan('s', 'q', 'c', 't'))
if not f[1] then return { 'missing' } end
local st = f[1]
if f[4] ~= ARGV[3] or (st ~= 'succeeded' and st ~= 'failed' and st ~= 'dead') then return { 'fenced' } end
if redis.call('ZREM', NS .. 'results', id) == 0 then return { 'fenced' } end
-- The attempt record the hash holds is superseded now: move it to the history list.
flush_closed(id)
local now = now_ms()
hset(jk, { 'cr', '0', 'ra', '0', 'u', s(now), 'e', put_long(id, 'e', '=' .. ARGV[4]) })
set_state(id, st, 'queued', f[3])
schedule(id, f[2], now, now, f[3], false)
publish_changed()
return { 'queued' }
