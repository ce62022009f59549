-- ARGV: ns, queue, max, worker_id, host, pid, request_id, promote_limit
-- Returns {{job_view...}, next_due_ms (-1 = none), now_ms}.
-- A retry with the same request_id returns the jobs that request already leased.
local queue, max = ARGV[2], tonumber(ARGV[3])
local worker, host, pid = ARGV[4], ARGV[5], ARGV[6]
local reqkey = NS .. 'leasereq:' .. ARGV[7]
local now = now_ms()

local prior = redis.call('LRANGE', reqkey, 0, -1)
if #prior > 0 then
  local out = {}
  for i = 1, #prior, 2 do
    local f = redis.call('HMGET', jkey(prior[i]), 'state', 'token')
    if f[1] == 'running' and f[2] == prior[i + 1] then out[#out + 1] = job_view(prior[i]) end
  end
  return { out, -1, now }
end

local ready = NS .. 'ready:' .. queue
local delayed = NS .. 'delayed:' .. queue

-- Promote a bounded number of due delayed jobs, in due order.
local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, tonumber(ARGV[8]))
if #due > 0 then
  local base = redis.call('INCRBY', NS .. 'seq', #due) - #due
  for i, id in ipairs(due) do
    redis.call('ZREM', delayed, id)
    redis.call('ZADD', ready, base + i, id)
  end
end

local out = {}
local popped = redis.call('ZPOPMIN', ready, max)
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = jkey(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'token', 'stale_after', 'created_at')
  if f[1] == 'queued' then
    local attempts = tonumber(f[2]) + 1
    local token = tonumber(f[3]) + 1
    redis.call('HSET', jk, 'attempts', s(attempts), 'token', s(token),
      'owner_worker', worker, 'owner_host', host, 'owner_pid', pid,
      'acquired_at', s(now), 'heartbeat_at', s(now), 'updated_at', s(now))
    set_state(id, 'queued', 'running', f[5])
    redis.call('ZADD', NS .. 'leases', s(now + tonumber(f[4])), id)
    redis.call('RPUSH', hkey(id), cjson.encode({
      attempt = attempts, fencing_token = token, worker = worker, host = host,
      pid = tonumber(pid), started_at_ms = now }))
    redis.call('RPUSH', reqkey, id, s(token))
    out[#out + 1] = job_view(id)
  end
end
if #out > 0 then
  redis.call('PEXPIRE', reqkey, 600000)
  return { out, -1, now }
end

local next_due = -1
local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
if #first > 0 then next_due = tonumber(first[2]) end
return { out, next_due, now }
