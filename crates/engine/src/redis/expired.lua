-- ARGV: ns, limit. Returns {{job_id, token, attempts, max_attempts, idempotent, cancel_requested}...}
-- for running jobs whose heartbeat_at + stale_after < now, oldest deadline first.
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', NS .. 'leases', '-inf', '(' .. s(now), 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
local P = plan('s', 't', 'a', 'm', 'i', 'cr')
for _, id in ipairs(ids) do
  local f = hmget(jkey(id), P)
  if f[1] == 'running' then
    out[#out + 1] = { id, f[2], f[3], f[4], f[5], f[6] }
  else
    redis.call('ZREM', NS .. 'leases', id)
  end
end
return out
