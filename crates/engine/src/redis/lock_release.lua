-- ARGV: ns, name, token. Returns 1 when released, 0 when it was no longer held under token.
-- A released lock's hash is deleted (its next token comes from `locktoken`: lock_acquire.lua).
local lk = NS .. 'lock:' .. ARGV[2]
local f = redis.call('HMGET', lk, 'held', 'token')
if f[1] ~= '1' or f[2] ~= ARGV[3] then return 0 end
redis.call('DEL', lk)
redis.call('ZREM', NS .. 'locks', ARGV[2])
return 1
