-- ARGV: ns, candidate epoch. The namespace's epoch: created (set to the candidate) when
-- missing, i.e. for a new namespace or one whose data was lost. Returns
-- {epoch, created (0/1), jobs in the namespace}: the members of the sets every job is in by
-- its state (ready, delayed, leases, results, done) plus the old `jobs` index of a namespace
-- written by an older build (a job may be counted twice there: an estimate).
local k = NS .. 'epoch'
local old = redis.call('ZCARD', NS .. 'jobs')
local jobs = old
for _, key in ipairs({ 'leases', 'results', 'done:succeeded', 'done:failed' }) do
  jobs = jobs + redis.call('ZCARD', NS .. key)
end
for _, q in ipairs(redis.call('SMEMBERS', NS .. 'queues')) do
  jobs = jobs + redis.call('ZCARD', NS .. 'ready:' .. q) + redis.call('ZCARD', NS .. 'delayed:' .. q)
end
-- Jobs an older build wrote are in `jobs` (this build indexes none there): with none, there is
-- nothing in an older layout to rewrite (see migrate.rs).
if old == 0 then redis.call('SET', NS .. 'layout', '3', 'NX') end
local e = redis.call('GET', k)
if e then return { e, 0, jobs } end
redis.call('SET', k, ARGV[2])
-- An empty namespace has no jobs from a build before retention to file (see prune.lua).
if old == 0 then redis.call('SET', NS .. 'done:backfill', 'done') end
return { ARGV[2], 1, jobs }
