-- ARGV: ns, queue, max, worker_id, host, pid, request_id, promote_limit
-- Returns {{leased_view...}, next_due_ms (-1 = none), now_ms}.
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

promote_due(queue, now, tonumber(ARGV[8]))

local out = {}
local record = {}
local sets = new_sets()
for _, id in ipairs(pop_ready(queue, max)) do
  local token = lease_one(id, worker, host, pid, now, sets)
  if token then
    record[#record + 1] = id
    record[#record + 1] = s(token)
    out[#out + 1] = leased_view(id, token)
  end
end
flush_sets(sets)
if #out > 0 then
  redis.call('RPUSH', reqkey, unpack(record))
  redis.call('PEXPIRE', reqkey, 600000)
  return { out, -1, now }
end

local next_due = -1
local first = redis.call('ZRANGE', NS .. 'delayed:' .. queue, 0, 0, 'WITHSCORES')
if #first > 0 then next_due = tonumber(first[2]) end
return { out, next_due, now }
