-- ARGV: ns, job_id. Cancels a queued or stale job now, or asks a running one to stop. Returns {'cancelled'} | {'requested'} | {'terminal', state} | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = hmget(jk, plan('s', 'q', 'c', 't', 'sr'))
if not f[1] then return { 'missing' } end
local now = now_ms()
if f[1] == 'queued' or f[1] == 'stale' then
  local token = f[4]
  local sr = f[5]
  -- A queued job is in its delayed set or its ready list; the ready list keeps the entry (lazy,
  -- see schedule in common.lua), counted in `sr` so that the lease skips it.
  if f[1] == 'queued' and redis.call('ZREM', NS .. 'delayed:' .. f[2], id) == 0 then
    sr = s(tonumber(sr) + 1)
  end
  set_state(id, f[1], 'cancelled', f[3])
  -- A job leased before (a retried or stale one) may have a result applied under its current
  -- token: the cancel is a new result, so it gets a new token (a never-leased job keeps 0).
  if token ~= '0' then token = s(tonumber(token) + 1) end
  hset(jk, { 'u', s(now), 'ra', '0', 't', token, 'sr', sr })
  to_results(id)
  return { 'cancelled' }
elseif f[1] == 'running' then
  hset(jk, { 'cr', '1', 'u', s(now) })
  return { 'requested' }
end
return { 'terminal', f[1] }
