-- ARGV: ns, name, worker_id, host, pid, heartbeat_ms, stale_after_ms.
-- Returns {'acquired', token} | {'held', worker, host, pid, token, acquired_at, heartbeat_at}.
-- Tokens come from the namespace's counter `locktoken`, so they strictly increase across a
-- lock's releases although a released or reaped lock's hash is deleted (a hash written by an
-- older build, which kept the counter in the hash, raises the counter past its token).
local name = ARGV[2]
local lk = NS .. 'lock:' .. name
local now = now_ms()
local f = redis.call('HMGET', lk, 'held', 'owner_worker', 'owner_host', 'owner_pid', 'token', 'acquired_at', 'heartbeat_at', 'stale_after')
if f[1] == '1' and now - tonumber(f[7]) <= tonumber(f[8]) then
  return { 'held', f[2], f[3], f[4], f[5], f[6], f[7] }
end
local tk = NS .. 'locktoken'
local token = redis.call('INCR', tk)
local prev = tonumber(f[5] or '0') or 0
if token <= prev then
  token = prev + 1
  redis.call('SET', tk, s(token))
end
redis.call('HSET', lk, 'held', '1', 'owner_worker', ARGV[3], 'owner_host', ARGV[4], 'owner_pid', ARGV[5],
  'token', s(token), 'acquired_at', s(now), 'heartbeat_at', s(now), 'heartbeat_ms', ARGV[6], 'stale_after', ARGV[7])
redis.call('ZADD', NS .. 'locks', s(now + tonumber(ARGV[7])), name)
return { 'acquired', s(token) }
