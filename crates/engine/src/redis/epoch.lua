-- ARGV: ns, candidate epoch. The namespace's epoch: created (set to the candidate) when
-- missing, i.e. for a new namespace or one whose data was lost. Returns
-- {epoch, created (0/1), jobs in the namespace}: the members of the sets every job is in by
-- its state (ready, delayed, leases, results, done) plus the old `jobs` index of a namespace
-- written by an older build (a job may be counted twice there: an estimate).
local k = NS .. 'epoch'
-- The members of a set or list (ready and done lists are sorted sets before layout 4).
local function size(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'zset' then return redis.call('ZCARD', key) end
  if t == 'list' then return redis.call('LLEN', key) end
  return 0
end
local old = redis.call('ZCARD', NS .. 'jobs')
local jobs = old
for _, key in ipairs({ 'leases', 'results', 'done:succeeded', 'done:failed' }) do
  jobs = jobs + size(NS .. key)
end
local queues = redis.call('SMEMBERS', NS .. 'queues')
for _, q in ipairs(queues) do
  jobs = jobs + size(NS .. 'ready:' .. q) + redis.call('ZCARD', NS .. 'delayed:' .. q)
end
-- Jobs a build before layout 3 wrote are in `jobs` (no later build indexes any there), and a
-- namespace of layout 3 has a `layout` key: with neither and no queue, the namespace is new and
-- in this build's layout at once (see migrate.rs).
if old == 0 and #queues == 0 then redis.call('SET', NS .. 'layout', LAYOUT, 'NX') end
local e = redis.call('GET', k)
if e then return { e, 0, jobs } end
redis.call('SET', k, ARGV[2])
-- An empty namespace has no jobs from a build before retention to file (see prune.lua).
if old == 0 then redis.call('SET', NS .. 'done:backfill', 'done') end
return { ARGV[2], 1, jobs }
