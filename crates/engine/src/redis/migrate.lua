-- ARGV: ns, cursor (the `layout:cursor` to store after this batch, 'done' = the walk ended),
--       n, then n jobs: id, old state, old updated_at, k (field count), k field/value pairs.
-- Rewrites each job hash of an older layout (1 or 2, with its long `spec` JSON field) as
-- layout 3, built by migrate.rs; a hash that changed since migrate.rs read it (its `state` or
-- `updated_at` differ, or it is gone) is left alone and counted. The history list, the output
-- stream and every index entry stay as they are (layout 3 keeps their keys and members).
-- Values longer than LONG go to their own key (put_long). Returns the number left alone.
local n = tonumber(ARGV[3])
local i = 4
local missed = 0
for _ = 1, n do
  local id, state, updated, k = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'updated_at')
  if f[1] == state and f[2] == updated then
    local fields = {}
    for j = i + 4, i + 3 + 2 * k, 2 do
      local name, v = ARGV[j], ARGV[j + 1]
      if name == 'p' or name == 'x' or name == 'o' or name == 'e' then v = put_long(id, name, v) end
      fields[#fields + 1] = name
      fields[#fields + 1] = v
    end
    redis.call('DEL', jk)
    redis.call('HSET', jk, unpack(fields))
    redis.call('SADD', NS .. 'queues', redis.call('HGET', jk, 'q'))
  else
    missed = missed + 1
  end
  i = i + 4 + 2 * k
end
if ARGV[2] == 'done' then
  redis.call('SET', NS .. 'layout', '3')
  redis.call('DEL', NS .. 'layout:cursor')
else
  redis.call('SET', NS .. 'layout:cursor', ARGV[2])
end
return missed
