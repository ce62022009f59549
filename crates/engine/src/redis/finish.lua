-- ARGV: ns, job_id, token, next_state, retry_delay_ms, attempt_result,
--       outcome_json ('' = none), has_error (0/1), error
-- Returns {'applied', state} | {'fenced', current_token} | {'missing'}.
local id, token, next = ARGV[2], ARGV[3], ARGV[4]
local jk = jkey(id)
local f = redis.call('HMGET', jk, 'state', 'token', 'queue', 'created_at', 'closed_token', 'closed_by', 'cancel_requested')
if not f[1] then return { 'missing' } end
if f[1] ~= 'running' or f[2] ~= token then
  -- A retried call whose first try was applied (response lost) reports the same success.
  if f[2] == token and f[5] == token and f[6] == 'finish' then return { 'applied', f[1] } end
  return { 'fenced', f[2] }
end
-- A cancel request wins over a retry (same rule as the SQLite backend).
if next == 'queued' and f[7] == '1' then next = 'cancelled' end
local now = now_ms()
local delay = tonumber(ARGV[5])
if next == 'queued' then
  end_attempt(id, token, now, ARGV[6], delay)
else
  end_attempt(id, token, now, ARGV[6], nil)
end
clear_lease(id)
redis.call('HSET', jk, 'updated_at', s(now), 'closed_token', token, 'closed_by', 'finish')
if ARGV[7] ~= '' then redis.call('HSET', jk, 'outcome', ARGV[7]) else redis.call('HDEL', jk, 'outcome') end
if ARGV[8] == '1' then redis.call('HSET', jk, 'error', ARGV[9]) else redis.call('HDEL', jk, 'error') end
set_state(id, 'running', next, f[4])
if next == 'queued' then
  schedule(id, f[3], next_seq(), now + delay, now)
elseif TERMINAL[next] then
  to_results(id)
end
return { 'applied', next }
