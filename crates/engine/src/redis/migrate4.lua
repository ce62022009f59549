-- ARGV: ns, batch. One step of the rewrite of a layout-3 namespace into layout 4 (migrate.rs),
-- at most `batch` members moved or jobs looked at; returns 'more' or, once every step is done
-- and `layout` is set to LAYOUT, 'done'. Each step is atomic and idempotent: processes that
-- connect at once share the work. In order:
-- 1. the backfill of a namespace written before retention: its acknowledged terminal jobs
--    (in the `jobs` index by creation time, from the cursor `done:backfill`) are filed into
--    `done:{class}`, still sorted sets here, so a job filed twice is filed once;
-- 2. `done:succeeded`, `done:failed` and every queue's `ready:{queue}`, sorted sets in layout 3,
--    become lists in score order (finish time; enqueue sequence): members move to
--    `{key}:l4` and it is renamed to `{key}` once the set is empty.
-- Job hashes are not rewritten: layout 3 stores every field, which layout 4 reads the same.
local batch = tonumber(ARGV[2])

local bk = NS .. 'done:backfill'
local cursor = redis.call('GET', bk)
if cursor ~= 'done' then
  local rows = redis.call('ZRANGEBYSCORE', NS .. 'jobs', cursor or '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, batch)
  local P = plan('s', 'u')
  for i = 1, #rows, 2 do
    local id = rows[i]
    local f = hmget(jkey(id), P)
    local c = RETAIN_CLASS[f[1] or '']
    if c and not redis.call('ZSCORE', NS .. 'results', id) then
      redis.call('ZADD', NS .. 'done:' .. c, tonumber(f[2]) or 0, id)
    end
  end
  if #rows < 2 * batch then
    redis.call('SET', bk, 'done')
  else
    local first, last = tonumber(rows[2]), tonumber(rows[#rows])
    -- A whole batch of one creation time cannot move an inclusive cursor: step past it.
    if last == first then last = last + 1 end
    redis.call('SET', bk, s(last))
  end
  return 'more'
end

local keys = { NS .. 'done:succeeded', NS .. 'done:failed' }
for _, q in ipairs(redis.call('SMEMBERS', NS .. 'queues')) do keys[#keys + 1] = NS .. 'ready:' .. q end
for _, key in ipairs(keys) do
  local tmp = key .. ':l4'
  local t = redis.call('TYPE', key)['ok']
  if t == 'zset' then
    local ids = redis.call('ZRANGE', key, 0, batch - 1)
    redis.call('RPUSH', tmp, unpack(ids))
    redis.call('ZREM', key, unpack(ids))
    if redis.call('EXISTS', key) == 0 then redis.call('RENAME', tmp, key) end
    return 'more'
  elseif t == 'none' and redis.call('EXISTS', tmp) == 1 then
    redis.call('RENAME', tmp, key)
    return 'more'
  end
end
redis.call('SET', NS .. 'layout', LAYOUT)
return 'done'
