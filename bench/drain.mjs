// Worker drain throughput (`npm run bench`, second part): N order.send_confirmation jobs on N
// orders, drained by 1, 2 and 4 standalone worker processes (`npm run worker`, WORKER_CONCURRENCY
// each), with the resource lock in Redis and with in-process locks (no Redis round trips, and no
// lock shared between processes: the Postgres fence and side-effect markers alone keep it exact).
// Time is taken from the database: first job started → last job completed. Bounded: BENCH_JOBS
// (default 1000) jobs per row. Fills in the drain section of docs/benchmarks.md that run.mjs wrote.
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { samplePeakRss } from './memory.mjs'
import { markdownTable, writeDrainSection } from './report.mjs'

const adminUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const jobCount = Number(process.env.BENCH_JOBS ?? 1000)
const concurrency = process.env.BENCH_WORKER_CONCURRENCY ?? '4'
const projectRoot = fileURLToPath(new URL('..', import.meta.url))
const jitiCli = `${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`

function startWorker(databaseUrl, redis, prefix, index) {
  const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', WORKER_CONCURRENCY: concurrency, WORKER_ID: `bench-${index}`, REDIS_KEY_PREFIX: prefix, JOB_POLL_INTERVAL_MS: '200' }
  delete env.REDIS_URL
  if (redis) env.REDIS_URL = redisUrl
  const child = spawn(process.execPath, [jitiCli, 'scripts/worker.ts'], { cwd: projectRoot, env, stdio: ['ignore', 'ignore', 'inherit'] })
  const memory = samplePeakRss(child.pid)
  /** Ends the worker; resolves to its peak RSS in MiB. */
  const stop = () => new Promise((resolve) => {
    const peakRssMiB = memory.stop()
    child.once('exit', () => resolve(peakRssMiB))
    child.kill('SIGTERM')
  })
  return { stop }
}

async function drain(sql, databaseUrl, workers, redis) {
  await sql`truncate jobs, orders, mailbox, side_effects, tenants cascade`
  await sql`insert into tenants (id, name) values ('ten_bench', 'bench')`
  await sql`insert into orders (id, tenant_id, cart_id, currency, amount, payment_method, items, customer, request_id)
    select 'ord_bench_' || i, 'ten_bench', 'cart_' || i, 'IDR', 150000, 'card', '[{"sku":"SKU-1","quantity":2,"unitPrice":75000}]', '{"email":"b@example.com"}', 'req_bench'
    from generate_series(1, ${jobCount}) i`
  // Not due until every worker listens, so the slowest worker's start-up is not measured.
  await sql`insert into jobs (id, kind, dedupe_key, payload, resource_id, max_attempts, run_at)
    select 'job_bench_' || i, 'order.send_confirmation', 'ord_bench_' || i, jsonb_build_object('orderId', 'ord_bench_' || i), 'order:ord_bench_' || i, 8, now() + interval '1 hour'
    from generate_series(1, ${jobCount}) i`
  const prefix = `bench:${randomUUID()}:`
  const started = Array.from({ length: workers }, (_, i) => startWorker(databaseUrl, redis, prefix, i))
  let peakRssMiB
  try {
    for (let waited = 0; ; waited += 100) {
      const [{ listening }] = await sql`select count(*)::int as listening from pg_stat_activity
        where datname = current_database() and query ilike 'listen%'`
      if (listening === workers) break
      if (waited > 60_000) throw new Error(`only ${listening} of ${workers} workers started`)
      await sleep(100)
    }
    await sql`update jobs set run_at = now()`
    await sql`select pg_notify('jobs_ready', '')`
    for (let waited = 0; ; waited += 100) {
      const [{ done }] = await sql`select count(*)::int as done from jobs where status = 'completed'`
      if (done === jobCount) break
      if (waited > 300_000) throw new Error(`drain did not finish: ${done}/${jobCount}`)
      await sleep(100)
    }
  }
  finally {
    peakRssMiB = Math.max(...await Promise.all(started.map(worker => worker.stop())))
  }
  const [timing] = await sql`select extract(epoch from max(completed_at) - min(started_at)) * 1000 as ms,
    (select count(*)::int from mailbox) as emails, max(attempt)::int as "maxAttempt" from jobs`
  if (timing.emails !== jobCount) throw new Error(`expected ${jobCount} emails, found ${timing.emails}`)
  const ms = Number(timing.ms)
  return { workers, lock: redis ? 'Redis' : 'in-process (no Redis)', jobs: jobCount, 'drain ms': Math.round(ms), 'jobs/s': Math.round(jobCount / (ms / 1000)), 'max attempt': timing.maxAttempt, 'peak RSS MiB': peakRssMiB }
}

const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
const database = `ic_bench_drain_${process.pid}`
await admin.unsafe(`CREATE DATABASE "${database}"`)
const databaseUrl = new URL(adminUrl)
databaseUrl.pathname = `/${database}`
// The first worker migrates the fresh database; wait for it before seeding.
const migrator = startWorker(databaseUrl.toString(), false, 'bench-migrate:', 'migrate')
const sql = postgres(databaseUrl.toString(), { max: 2, onnotice: () => {} })
try {
  try {
    for (let i = 0; ; i++) {
      const [{ ready }] = await sql`select to_regclass('public.jobs') is not null as ready`
      if (ready) break
      if (i > 600) throw new Error('migrations did not run')
      await sleep(100)
    }
  }
  finally {
    await migrator.stop()
  }
  const rows = []
  for (const redis of [true, false]) {
    for (const workers of [1, 2, 4]) rows.push(await drain(sql, databaseUrl.toString(), workers, redis))
  }
  const settings = `${jobCount} order.send_confirmation jobs, WORKER_CONCURRENCY=${concurrency} per process`
  console.log(`\nworker drain: ${settings}`)
  console.table(rows)
  const rate = (workers, lock) => rows.find(r => r.workers === workers && r.lock.startsWith(lock))['jobs/s']
  const ratios = `2 workers / 1: Redis ${(rate(2, 'Redis') / rate(1, 'Redis')).toFixed(2)}×, in-process ${(rate(2, 'in') / rate(1, 'in')).toFixed(2)}×`
    + `; Redis lock / in-process (1 worker): ${(rate(1, 'Redis') / rate(1, 'in')).toFixed(2)}×`
  console.log(ratios)
  const written = writeDrainSection([
    `${settings}, drained by standalone worker processes (\`npm run worker\`); time from the first job started to the last completed, read from the database; peak RSS of the largest worker.`,
    '',
    markdownTable(rows),
    '',
    `${ratios}.`,
  ])
  console.log(written ? '\nfilled in the drain section of docs/benchmarks.md' : '\ndocs/benchmarks.md has no pending drain section (run `npm run bench` to write a new document): left as it is')
}
finally {
  await sql.end()
  await admin.unsafe(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
  await admin.end()
}
