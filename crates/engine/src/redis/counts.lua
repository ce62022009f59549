-- ARGV: ns, budget.
-- Jobs per state from the cardinality of the sets their jobs are in (O(1) each), for the web
-- console's queue page: running = `leases`, failed/dead/cancelled/stale = `state:*`, succeeded =
-- the acknowledged ones in `done:succeeded` plus the succeeded among the oldest `budget` pending
-- results (a handful while ingestion keeps up), queued = every job (`jobs`) less the others.
-- Then each queue's due and delayed entries (a job cancelled while queued keeps its lazy `ready`
-- entry until a worker pops it, so a queue's figure may count it a little longer).
-- Returns {queued, running, succeeded, failed, dead, cancelled, stale, {queue, n, ...}}.
local budget = tonumber(ARGV[2])
local total = redis.call('ZCARD', NS .. 'jobs')
local running = redis.call('ZCARD', NS .. 'leases')
local rare = {}
local rare_sum = 0
for i, st in ipairs({ 'failed', 'dead', 'cancelled', 'stale' }) do
  rare[i] = redis.call('ZCARD', NS .. 'state:' .. st)
  rare_sum = rare_sum + rare[i]
end
local succeeded = redis.call('LLEN', NS .. 'done:succeeded')
local P = plan('s')
for _, id in ipairs(redis.call('ZRANGE', NS .. 'results', 0, budget - 1)) do
  if hmget(jkey(id), P)[1] == 'succeeded' then succeeded = succeeded + 1 end
end
local queued = math.max(0, total - running - rare_sum - succeeded)
local per = {}
for _, q in ipairs(redis.call('SMEMBERS', NS .. 'queues')) do
  local n = redis.call('LLEN', NS .. 'ready:' .. q) + redis.call('ZCARD', NS .. 'delayed:' .. q)
  if n > 0 then
    per[#per + 1] = q
    per[#per + 1] = tostring(n)
  end
end
return { queued, running, succeeded, rare[1], rare[2], rare[3], rare[4], per }
