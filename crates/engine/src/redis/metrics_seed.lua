-- ARGV: ns. Counts the depth of a namespace whose jobs were written before the `/metrics`
-- counters existed, or that lost its data (once: `seeded` in the hash `metrics` marks it; a new
-- namespace is seeded empty at its first open). Reads every job hash once (KEYS): O(jobs), at
-- open only.
-- Returns the number of jobs counted.
if redis.call('HEXISTS', K_METRICS, 'seeded') == 1 then return 0 end
-- Counted from the jobs themselves, whatever depth fields a namespace that lost its data (and
-- its mark) kept counting since: the script is atomic, so the count is exact when it ends.
for _, field in ipairs(redis.call('HKEYS', K_METRICS)) do
  if string.sub(field, 1, 6) == 'depth' .. US then redis.call('HDEL', K_METRICS, field) end
end
local n = 0
local prefix = NS .. 'job:'
for _, k in ipairs(redis.call('KEYS', prefix .. '*')) do
  local id = string.sub(k, #prefix + 1)
  if not string.find(id, ':', 1, true) then
    local f = redis.call('HMGET', k, 's', 'q', PRESENT)
    if f[3] then
      metric('depth', f[2] or DEFAULTS.q, '', '', f[1] or DEFAULTS.s, 1)
      n = n + 1
    end
  end
end
redis.call('HSET', K_METRICS, 'seeded', '1')
return n
