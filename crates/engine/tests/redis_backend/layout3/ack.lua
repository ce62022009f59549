-- ARGV: ns, job_id, fencing_token. Acknowledges the job's pending result only when the job's
-- current token is the one whose result was applied (a retried or re-leased job keeps a newer
-- attempt's result pending). Returns {'acked'} | {'fenced', current_token} | {'missing'}.
-- A terminal job acknowledged here becomes prunable: it enters its retention class's
-- `done:{class}` set, scored by its finish time (`updated_at`).
local id = ARGV[2]
local f = redis.call('HMGET', jkey(id), 't', 's', 'u')
local token = f[1]
if not token then return { 'missing' } end
if token ~= ARGV[3] then return { 'fenced', token } end
redis.call('ZREM', NS .. 'results', id)
local class = RETAIN_CLASS[f[2]]
if class then redis.call('ZADD', NS .. 'done:' .. class, tonumber(f[3]) or 0, id) end
return { 'acked' }
