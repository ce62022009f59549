-- ARGV: ns, candidate epoch. The namespace's epoch: created (set to the candidate) when
-- missing, i.e. for a new namespace or one whose data was lost. Returns
-- {epoch, created (0/1), jobs in the namespace's index}.
local k = NS .. 'epoch'
local jobs = redis.call('ZCARD', NS .. 'jobs')
local e = redis.call('GET', k)
if e then return { e, 0, jobs } end
redis.call('SET', k, ARGV[2])
-- An empty namespace has no jobs from a build before retention to file (see prune.lua).
if jobs == 0 then redis.call('SET', NS .. 'done:backfill', 'done') end
return { ARGV[2], 1, jobs }
