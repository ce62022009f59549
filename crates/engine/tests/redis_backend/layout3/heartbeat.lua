-- ARGV: ns, job_id, token. Returns 'renewed', 'cancel' or 'lost'.
local id, token = ARGV[2], ARGV[3]
local f = redis.call('HMGET', jkey(id), 's', 't', 'cr', 'sa')
if f[1] ~= 'running' or f[2] ~= token then return 'lost' end
local now = now_ms()
redis.call('HSET', jkey(id), 'hh', s(now))
redis.call('ZADD', NS .. 'leases', s(now + tonumber(f[4])), id)
if f[3] == '1' then return 'cancel' end
return 'renewed'
