-- ARGV: ns, name, token. Returns 1 when renewed, 0 when the lock is no longer held under token.
local lk = NS .. 'lock:' .. ARGV[2]
local f = redis.call('HMGET', lk, 'held', 'token', 'stale_after')
if f[1] ~= '1' or f[2] ~= ARGV[3] then return 0 end
local now = now_ms()
redis.call('HSET', lk, 'heartbeat_at', s(now))
redis.call('ZADD', NS .. 'locks', s(now + tonumber(f[3])), ARGV[2])
return 1
