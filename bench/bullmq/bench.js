// BullMQ peer for skillforge's benchmark (see ../README.md). Driven by `skillforge-bench`;
// every mode prints JSON lines on stdout, one object per event, the last one being the result.
//
//   node bench.js throughput     --port P --n N --concurrency C --queue Q
//   node bench.js latency-worker --port P --n N --concurrency C --queue Q
//   node bench.js produce        --port P --n N --rate R --queue Q
//   node bench.js recovery       --port P --queue Q --role victim|survivor
//   node bench.js memory         --port P --n N --concurrency C --queue Q
//   throughput takes --pages K (time K getJobs(completed, 0, 49) and K getJob after the drain);
//   latency-worker takes --backlog B (B delayed jobs added to the queue first).
'use strict';

const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

function args() {
  const out = { _: process.argv[2] };
  for (let i = 3; i < process.argv.length; i += 2) {
    out[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  }
  return out;
}

const a = args();
const connection = { host: '127.0.0.1', port: Number(a.port), maxRetriesPerRequest: null };
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Wall clock in microseconds since the Unix epoch, comparable across processes (timeOrigin is
// sub-millisecond, unlike Date.now()).
const wallUs = () => (performance.timeOrigin + performance.now()) * 1000;

function parseInfo(text) {
  const out = {};
  for (const line of text.split('\r\n')) {
    const m = line.match(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/);
    if (m) out[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
    const c = line.match(/^(used_cpu_sys|used_cpu_user):([\d.]+)/);
    if (c) out[c[1]] = Number(c[2]);
  }
  return out;
}

async function serverStats(redis) {
  const cmd = parseInfo(await redis.info('commandstats'));
  const cpu = parseInfo(await redis.info('cpu'));
  return { commands: cmd, cpu_s: (cpu.used_cpu_sys || 0) + (cpu.used_cpu_user || 0) };
}

async function addNoops(queue, n, opts) {
  const ids = [];
  for (let i = 0; i < n; i += 1000) {
    const chunk = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) chunk.push({ name: 'noop', data: {}, opts });
    const jobs = await queue.addBulk(chunk);
    if (ids.length < 10000) ids.push(...jobs.map((j) => j.id));
  }
  return ids;
}

// Times `k` calls of `f(i)` in ms.
async function timed(k, f) {
  const out = [];
  for (let i = 0; i < k; i++) {
    const t = performance.now();
    await f(i);
    out.push(performance.now() - t);
  }
  return out;
}

async function throughput() {
  const n = Number(a.n);
  const queue = new Queue(a.queue, { connection });
  await queue.obliterate({ force: true }).catch(() => {});
  const ids = await addNoops(queue, n, undefined);
  const admin = new IORedis(connection);
  await admin.config('RESETSTAT');
  const before = await serverStats(admin);
  const cpu0 = process.cpuUsage();
  let first = null;
  let last = null;
  let completed = 0;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const worker = new Worker(
    a.queue,
    async () => {
      if (first === null) first = process.hrtime.bigint();
    },
    { connection, concurrency: Number(a.concurrency), autorun: false },
  );
  worker.on('completed', () => {
    completed++;
    if (completed === n) {
      last = process.hrtime.bigint();
      resolveDone();
    }
  });
  worker.run();
  await done;
  const cpu = process.cpuUsage(cpu0);
  const after = await serverStats(admin);
  await worker.close();
  const counts = await queue.getJobCounts('completed');
  const elapsedS = Number(last - first) / 1e9;
  let pages = null;
  if (a.pages) {
    const k = Number(a.pages);
    const list = await timed(k, async () => {
      const page = await queue.getJobs(['completed'], 0, 49);
      if (page.length !== 50) throw new Error(`a page of ${page.length} jobs`);
    });
    const show = await timed(k, async (i) => {
      const job = await queue.getJob(ids[(i * 7919) % ids.length]);
      if (!job) throw new Error('job missing');
    });
    pages = { list_ms: list, show_ms: show };
  }
  emit({
    n,
    elapsed_s: elapsedS,
    rate: n / elapsedS,
    verified_completed: counts.completed,
    client_cpu_s: (cpu.user + cpu.system) / 1e6,
    redis_cpu_s: after.cpu_s - before.cpu_s,
    redis_commands: after.commands,
    pages,
  });
  // A large queue is left to the caller's FLUSHALL (obliterating it job by job takes minutes).
  if (n <= 100000) await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  await admin.quit();
}

async function latencyWorker() {
  const n = Number(a.n);
  const queue = new Queue(a.queue, { connection });
  await queue.obliterate({ force: true }).catch(() => {});
  if (a.backlog) await addNoops(queue, Number(a.backlog), { delay: 86400000 });
  const lat = [];
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const worker = new Worker(
    a.queue,
    async (job) => {
      lat.push((wallUs() - job.data.sent_us) / 1000);
      if (lat.length === n) resolveDone();
    },
    { connection, concurrency: Number(a.concurrency) },
  );
  await worker.waitUntilReady();
  await sleep(300);
  emit({ event: 'ready' });
  await done;
  await worker.close();
  const counts = await queue.getJobCounts('completed');
  emit({ n, latencies_ms: lat, verified_completed: counts.completed });
  if (!a.backlog) await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
}

async function produce() {
  const n = Number(a.n);
  const every = 1000 / Number(a.rate);
  const queue = new Queue(a.queue, { connection });
  await queue.waitUntilReady();
  await queue.add('warm', { sent_us: 0 }).then((j) => j.remove()).catch(() => {});
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const due = start + i * every;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    await queue.add('noop', { sent_us: wallUs() });
  }
  emit({ event: 'produced', n });
  await queue.close();
}

async function recovery() {
  const queue = new Queue(a.queue, { connection });
  // BullMQ defaults: lockDuration 30 s (renewed every 15 s), stalledInterval 30 s.
  const worker = new Worker(
    a.queue,
    async () => {
      emit({ event: 'started', at_ms: wallUs() / 1000, pid: process.pid });
      await sleep(600_000);
    },
    { connection, concurrency: 1 },
  );
  await worker.waitUntilReady();
  emit({ event: 'ready', pid: process.pid });
  if (a.role === 'victim') {
    await queue.add('long', {}, { attempts: 3 });
  }
  await new Promise(() => {});
}

// Bytes per job in redis-server (`used_memory`, after MEMORY PURGE): n jobs added, then drained
// by one worker with BullMQ's defaults (completed jobs are kept: no removeOnComplete).
async function memory() {
  const n = Number(a.n);
  const queue = new Queue(a.queue, { connection });
  await queue.obliterate({ force: true }).catch(() => {});
  const admin = new IORedis(connection);
  const used = async () => {
    await admin.call('MEMORY', 'PURGE').catch(() => {});
    const m = (await admin.info('memory')).match(/^used_memory:(\d+)/m);
    return Number(m[1]);
  };
  const base = await used();
  await addNoops(queue, n, undefined);
  const queued = await used();
  let completed = 0;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const worker = new Worker(a.queue, async () => {}, { connection, concurrency: Number(a.concurrency) });
  worker.on('completed', () => {
    if (++completed === n) resolveDone();
  });
  await done;
  await worker.close();
  const finished = await used();
  const counts = await queue.getJobCounts('completed');
  emit({
    n,
    queued_bytes_per_job: (queued - base) / n,
    finished_bytes_per_job: (finished - base) / n,
    verified_completed: counts.completed,
  });
  await queue.close();
  await admin.quit();
}

const modes = { throughput, 'latency-worker': latencyWorker, produce, recovery, memory };
if (!modes[a._]) {
  console.error(`unknown mode ${a._}; expected one of ${Object.keys(modes).join(', ')}`);
  process.exit(2);
}
modes[a._]().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
