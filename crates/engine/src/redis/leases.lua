-- ARGV: ns. Returns {job_rows, lock_rows}; each row is
-- {name, worker, host, pid, token, acquired_at, heartbeat_at, heartbeat_ms, stale_after_ms}.
local jobs = {}
local P = plan('s', 'ow', 'oh', 'op', 't', 'la', 'hh', 'hb', 'sa')
for _, id in ipairs(redis.call('ZRANGE', NS .. 'leases', 0, -1)) do
  local f = hmget(jkey(id), P)
  if f[1] == 'running' and f[2] then
    jobs[#jobs + 1] = { id, f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9] }
  end
end
local locks = {}
for _, name in ipairs(redis.call('ZRANGE', NS .. 'locks', 0, -1)) do
  local f = redis.call('HMGET', NS .. 'lock:' .. name, 'held', 'owner_worker', 'owner_host', 'owner_pid', 'token',
    'acquired_at', 'heartbeat_at', 'heartbeat_ms', 'stale_after')
  if f[1] == '1' then
    locks[#locks + 1] = { name, f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9] }
  end
end
return { jobs, locks }
