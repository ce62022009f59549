-- ARGV: ns. The `/metrics` figures in one read: {now, workers alive, age (ms) of the oldest
-- pending result ('' = none), the `metrics` hash as field, value pairs}. O(fields + held locks).
local now = now_ms()
local alive = 0
for _, name in ipairs(redis.call('ZRANGEBYSCORE', NS .. 'locks', now, '+inf')) do
  if string.sub(name, 1, 7) == 'worker:' then alive = alive + 1 end
end
local lag = ''
local first = redis.call('ZRANGE', NS .. 'results', 0, 0)
if first[1] then
  local f = hmget(jkey(first[1]), plan('u'))
  local written = f[1] and tonumber(f[1])
  if written then lag = s(math.max(0, now - written)) end
end
return { s(now), s(alive), lag, redis.call('HGETALL', K_METRICS) }
