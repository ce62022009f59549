-- ARGV: ns, job_id, token. Returns 1 when released, 0 when the lease was not ours.
local id, token = ARGV[2], ARGV[3]
local jk = jkey(id)
local f = hmget(jk, plan('s', 't', 'q', 'c', 'ct', 'cb', 'a', 'cr'))
if not f[1] then return 0 end
if f[1] ~= 'running' or f[2] ~= token then
  if (f[1] == 'queued' or f[1] == 'cancelled') and f[5] == token and f[6] == 'release' then return 1 end
  return 0
end
local now = now_ms()
if f[8] == '1' then
  -- A cancel request wins over handing the job back (same rule as the SQLite backend).
  end_attempt(id, token, now, 'cancelled', nil)
  clear_lease(id)
  hset(jk, { 'u', s(now), 'ct', token, 'cb', 'release' })
  set_state(id, 'running', 'cancelled', f[4])
  to_results(id)
  return 1
end
end_attempt(id, token, now, 'released', nil)
clear_lease(id)
local attempts = math.max(0, tonumber(f[7]) - 1)
hset(jk, { 'a', s(attempts), 'u', s(now), 'ct', token, 'cb', 'release' })
set_state(id, 'running', 'queued', f[4])
-- At the head of its ready list: it was interrupted, not re-submitted, and was leased before
-- every job still in the list.
schedule(id, f[3], now, now, f[4], true)
return 1
