-- Many finishes, each optionally followed by leasing one next job for its worker, in one call.
-- ARGV: ns, request_id, promote_limit, n (finishes), m (lessees), then m lessees of 4 fields:
--   queue, worker_id, host, pid (a worker that wants a next job from that queue);
-- then n items of 8 fields:
--   job_id, token, next_state, retry_delay_ms, attempt_result, outcome_json ('' = none),
--   error ('' = none, else '=' followed by the text), lessee (1-based index of the lessee that
--   gets one next job after this finish, '0' = lease nothing).
-- Returns {{finish reply per item (see finish_one)}, {lease row...}, now_ms}; a lease row's tag
-- is the job id of the item it answers (see LEASE ROW in transitions.lua).
-- A retry with the same request_id re-applies the (idempotent) finishes and returns the jobs
-- the first try leased instead of leasing again.
local W = 8
local n, m = tonumber(ARGV[4]), tonumber(ARGV[5])
-- ARGV index of the first item; lessee l's fields start at ARGV[2 + 4 * l].
local I = 6 + m * 4
local reqkey = NS .. 'leasereq:' .. ARGV[2]
local now = now_ms()
local snow = s(now)

local sets = new_sets()
local replies = {}
for i = 0, n - 1 do
  local b = I + i * W
  replies[i + 1] = finish_one(ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5],
    ARGV[b + 6], now, snow, sets)
end
flush_sets(sets)

local leased = {}
if m == 0 then return { replies, leased, now } end
local prior = redis.call('LRANGE', reqkey, 0, -1)
if #prior > 0 then
  for i = 1, #prior, 3 do
    local row = current_row(prior[i], prior[i + 1], prior[i + 2])
    if row then leased[#leased + 1] = row end
  end
  return { replies, leased, now }
end

-- Items wanting a next job, grouped by queue in item order.
local wants, order = {}, {}
for i = 0, n - 1 do
  local l = tonumber(ARGV[I + i * W + 7])
  if l > 0 then
    local q = ARGV[2 + 4 * l]
    local items = wants[q]
    if not items then items = {}; wants[q] = items; order[#order + 1] = q end
    items[#items + 1] = i
  end
end
local record = {}
for _, q in ipairs(order) do
  promote_due(q, now, tonumber(ARGV[3]))
  local items = wants[q]
  local k = 1
  local popped = pop_ready(q, #items)
  for p = 1, #popped, 2 do
    local b = I + items[k] * W
    local lb = 2 + 4 * tonumber(ARGV[b + 7])
    local tag = ARGV[b]
    local row = lease_one(tag, popped[p], ARGV[lb + 1], ARGV[lb + 2], ARGV[lb + 3], now, snow, sets)
    if row then
      leased[#leased + 1] = row
      record[#record + 1] = tag; record[#record + 1] = popped[p]; record[#record + 1] = row[4]
      k = k + 1
    end
  end
end
flush_sets(sets)
if #record > 0 then
  redis.call('RPUSH', reqkey, unpack(record))
  redis.call('PEXPIRE', reqkey, 600000)
end
return { replies, leased, now }
