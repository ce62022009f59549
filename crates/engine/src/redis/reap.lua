-- ARGV: ns, job_id, token, action (requeue|recovery|dead|cancelled), delay_ms.
-- Returns 1 when applied, 0 when the lease changed or its heartbeat is no longer past stale_after.
local id, token, action = ARGV[2], ARGV[3], ARGV[4]
local jk = jkey(id)
local f = hmget(jk, plan('s', 't', 'hh', 'sa', 'q', 'c', 'ct', 'cb'))
if not f[1] then return 0 end
if f[1] ~= 'running' or f[2] ~= token then
  if f[2] == token and f[7] == token and f[8] == 'reap' then return 1 end
  return 0
end
local now = now_ms()
if now - tonumber(f[3]) <= tonumber(f[4]) then return 0 end
local delay = tonumber(ARGV[5])
if action == 'requeue' then
  end_attempt(id, token, now, 'stale', delay)
else
  end_attempt(id, token, now, 'stale', nil)
end
clear_lease(id)
hset(jk, { 'u', s(now), 'ct', token, 'cb', 'reap' })
metric('lease_recoveries', f[5], '', '', '', 1)
if action == 'requeue' then
  set_state(id, 'running', 'queued', f[6])
  schedule(id, f[5], now + delay, now, f[6], false)
elseif action == 'recovery' then
  set_state(id, 'running', 'stale', f[6])
  hset(jk, { 'ra', '1' })
  to_results(id)
elseif action == 'dead' then
  set_state(id, 'running', 'dead', f[6])
  to_results(id)
else
  set_state(id, 'running', 'cancelled', f[6])
  to_results(id)
end
return 1
