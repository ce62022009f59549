-- ARGV: ns, job_id, fencing_token. Acknowledges the job's pending result only when the job's
-- current token is the one whose result was applied (a retried or re-leased job keeps a newer
-- attempt's result pending). Returns {'acked'} | {'fenced', current_token} | {'missing'}.
-- A terminal job acknowledged here becomes prunable: it enters its retention class's list
-- `done:{class}` (at the tail: acknowledgement order). Acknowledging it again (a retried call
-- after a lost reply) files it once.
local id = ARGV[2]
local f = hmget(jkey(id), plan('t', 's'))
local token = f[1]
if not token then return { 'missing' } end
if token ~= ARGV[3] then return { 'fenced', token } end
if redis.call('ZREM', NS .. 'results', id) == 1 then
  local class = RETAIN_CLASS[f[2]]
  if class then redis.call('RPUSH', NS .. 'done:' .. class, id) end
end
return { 'acked' }
