-- ARGV: ns, limit. Frees up to `limit` held locks whose heartbeat is past stale_after (their
-- hashes are deleted, like a released lock's); returns their names.
local now = now_ms()
local names = redis.call('ZRANGEBYSCORE', NS .. 'locks', '-inf', '(' .. s(now), 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, name in ipairs(names) do
  local lk = NS .. 'lock:' .. name
  local f = redis.call('HMGET', lk, 'held', 'heartbeat_at', 'stale_after')
  if f[1] == '1' and now - tonumber(f[2]) > tonumber(f[3]) then
    redis.call('DEL', lk)
    redis.call('ZREM', NS .. 'locks', name)
    out[#out + 1] = name
  elseif f[1] ~= '1' then
    -- Released (or freed) by an older build, which kept the hash: delete it now.
    redis.call('DEL', lk)
    redis.call('ZREM', NS .. 'locks', name)
  end
end
return out
