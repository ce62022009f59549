-- Many finishes, each optionally followed by leasing one next job for its worker, in one call.
-- ARGV: ns, request_id, promote_limit, n, then n items of 12 fields:
--   job_id, token, next_state, retry_delay_ms, attempt_result, outcome_json ('' = none),
--   has_error (0/1), error, lease_queue ('' = lease nothing), worker_id, host, pid.
-- Returns {{finish reply per item}, {{item_index, leased_view...}...}}.
-- A retry with the same request_id re-applies the (idempotent) finishes and returns the jobs
-- the first try leased instead of leasing again.
local W = 12
local n = tonumber(ARGV[4])
local reqkey = NS .. 'leasereq:' .. ARGV[2]
local now = now_ms()

local sets = new_sets()
local replies = {}
for i = 0, n - 1 do
  local b = 5 + i * W
  replies[i + 1] = finish_one(ARGV[b], ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4],
    ARGV[b + 5], ARGV[b + 6], ARGV[b + 7], now, sets)
end
flush_sets(sets)

local prior = redis.call('LRANGE', reqkey, 0, -1)
local leased = {}
if #prior > 0 then
  for i = 1, #prior, 3 do
    local f = redis.call('HMGET', jkey(prior[i + 1]), 'state', 'token')
    if f[1] == 'running' and f[2] == prior[i + 2] then
      local v = job_view(prior[i + 1])
      leased[#leased + 1] = { tonumber(prior[i]), v[1], v[2] }
    end
  end
  return { replies, leased }
end

-- Items wanting a next job, grouped by queue in item order.
local wants, order = {}, {}
for i = 0, n - 1 do
  local q = ARGV[5 + i * W + 8]
  if q ~= '' then
    if not wants[q] then wants[q] = {}; order[#order + 1] = q end
    local items = wants[q]
    items[#items + 1] = i
  end
end
local record = {}
for _, q in ipairs(order) do
  promote_due(q, now, tonumber(ARGV[3]))
  local items = wants[q]
  local k = 1
  for _, id in ipairs(pop_ready(q, #items)) do
    local b = 5 + items[k] * W
    local token = lease_one(id, ARGV[b + 9], ARGV[b + 10], ARGV[b + 11], now, sets)
    if token then
      local v = leased_view(id, token)
      leased[#leased + 1] = { items[k], v[1], v[2] }
      record[#record + 1] = s(items[k]); record[#record + 1] = id; record[#record + 1] = s(token)
      k = k + 1
    end
  end
end
flush_sets(sets)
if #record > 0 then
  redis.call('RPUSH', reqkey, unpack(record))
  redis.call('PEXPIRE', reqkey, 600000)
end
return { replies, leased }
