-- ARGV: ns, job_id. Cancels a queued or stale job now, or asks a running one to stop. Returns {'cancelled'} | {'requested'} | {'terminal', state} | {'missing'}.
local id = ARGV[2]
local jk = jkey(id)
local f = redis.call('HMGET', jk, 's', 'q', 'c', 't')
if not f[1] then return { 'missing' } end
local now = now_ms()
if f[1] == 'queued' or f[1] == 'stale' then
  redis.call('ZREM', NS .. 'ready:' .. f[2], id)
  redis.call('ZREM', NS .. 'delayed:' .. f[2], id)
  set_state(id, f[1], 'cancelled', f[3])
  -- A job leased before (a retried or stale one) may have a result applied under its current
  -- token: the cancel is a new result, so it gets a new token (a never-leased job keeps 0).
  local token = f[4] or '0'
  if token ~= '0' then token = s(tonumber(token) + 1) end
  redis.call('HSET', jk, 'u', s(now), 'ra', '0', 't', token)
  to_results(id)
  return { 'cancelled' }
elseif f[1] == 'running' then
  redis.call('HSET', jk, 'cr', '1', 'u', s(now))
  return { 'requested' }
end
return { 'terminal', f[1] }
