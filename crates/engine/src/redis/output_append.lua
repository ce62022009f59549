-- ARGV: ns, job_id, token, cap, then (stream, data) pairs. Appends each pair to the job's output
-- stream `out:{id}` (fields s = stream, t = token, d = data), keeping at most `cap` entries.
-- Returns 1 when appended, 0 when the job is not running under `token` (nothing written).
local id, token, cap = ARGV[2], ARGV[3], ARGV[4]
local f = hmget(jkey(id), plan('s', 't'))
if f[1] ~= 'running' or f[2] ~= token then return 0 end
local key = NS .. 'out:' .. id
for i = 5, #ARGV - 1, 2 do
  redis.call('XADD', key, 'MAXLEN', cap, '*', 's', ARGV[i], 't', token, 'd', ARGV[i + 1])
end
return 1
