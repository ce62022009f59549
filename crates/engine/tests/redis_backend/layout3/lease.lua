-- ARGV: ns, queue, max, worker_id, host, pid, request_id, promote_limit
-- Returns {{lease row...}, next_due_ms (-1 = none), now_ms}; every row's tag is '' (see LEASE
-- ROW in transitions.lua).
-- A retry with the same request_id returns the jobs that request already leased.
local queue, max = ARGV[2], tonumber(ARGV[3])
local worker, host, pid = ARGV[4], ARGV[5], ARGV[6]
local reqkey = NS .. 'leasereq:' .. ARGV[7]
local now = now_ms()
local snow = s(now)

local prior = redis.call('LRANGE', reqkey, 0, -1)
if #prior > 0 then
  local out = {}
  for i = 1, #prior, 2 do
    local row = current_row('', prior[i], prior[i + 1])
    if row then out[#out + 1] = row end
  end
  return { out, -1, now }
end

promote_due(queue, now, tonumber(ARGV[8]))

local out = {}
local record = {}
local sets = new_sets()
local popped = pop_ready(queue, max)
for p = 1, #popped, 2 do
  local id = popped[p]
  local row = lease_one('', id, worker, host, pid, now, snow, sets)
  if row then
    record[#record + 1] = id
    record[#record + 1] = row[4]
    out[#out + 1] = row
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
