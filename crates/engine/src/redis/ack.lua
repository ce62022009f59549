-- ARGV: ns, job_id, fencing_token. Acknowledges the job's pending result only when the job's
-- current token is the one whose result was applied (a retried or re-leased job keeps a newer
-- attempt's result pending). Returns {'acked'} | {'fenced', current_token} | {'missing'}.
local id = ARGV[2]
local token = redis.call('HGET', jkey(id), 'token')
if not token then return { 'missing' } end
if token ~= ARGV[3] then return { 'fenced', token } end
redis.call('ZREM', NS .. 'results', id)
return { 'acked' }
