// Worker drain throughput (`npm run bench`, second part): N order.send_confirmation jobs on N
// orders, drained by 1, 2 and 4 standalone worker processes (`npm run worker`, WORKER_CONCURRENCY
// each), with the resource lock in Redis and with in-process locks (no Redis round trips, and no
// lock shared between processes: the Postgres fence and side-effect markers alone keep it exact).
// In the same run, on the same database server and at the same concurrency, graphile-worker (a dev
// dependency of the bench only, bench/graphile-peer.mjs) drains the same N jobs doing the same unit
// of work, with its defaults and with batched completion, in 1 and 2 processes.
// Time is taken from the database, alike for every row: from the now() of the statement that made
// the N jobs due to max(mailbox.created_at), the now() of the transaction that wrote the last email.
// That leaves out the rest of the last transaction (its commit; for graphile-worker also the later
// completion write): a millisecond or so at the end of a drain of seconds, on either side.
// Bounded: BENCH_JOBS (default 2000) jobs per row. Fills in the drain section of
// docs/benchmarks.md that run.mjs wrote.
import { spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import Redis from 'ioredis'
import postgres from 'postgres'
import { samplePeakRss } from './memory.mjs'
import { startTurnsProxy } from './pg-turns-proxy.mjs'
import { markdownTable, writeDrainSection } from './report.mjs'

const adminUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const jobCount = Number(process.env.BENCH_JOBS ?? 2000)
const concurrency = process.env.BENCH_WORKER_CONCURRENCY ?? '4'
const pollIntervalMs = '200'
const projectRoot = fileURLToPath(new URL('..', import.meta.url))
const jitiCli = `${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`
const peerScript = fileURLToPath(new URL('graphile-peer.mjs', import.meta.url))
const graphileVersion = JSON.parse(readFileSync(`${projectRoot}node_modules/graphile-worker/package.json`, 'utf8')).version
const ours = 'this app (`npm run worker`)'
const peerModes = {
  default: `graphile-worker ${graphileVersion} (default)`,
  batched: `graphile-worker ${graphileVersion} (batched completion, local queue)`,
}
// What each process runs LISTEN with, to tell when all of them are listening.
const listenQuery = { ours: 'listen%', peer: 'LISTEN "jobs:insert"%' }

/** Spawns a worker process; `stop()` ends it and resolves to its peak RSS in MiB and its stdout. */
const mockpaySecret = `whsec_${randomBytes(32).toString('base64')}`

function startProcess(args, env) {
  const child = spawn(process.execPath, args, { cwd: projectRoot, env, stdio: ['ignore', 'pipe', 'inherit'] })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk) => { output += chunk })
  const memory = samplePeakRss(child.pid)
  const exited = new Promise(resolve => child.once('exit', code => resolve(code)))
  const stop = async () => {
    const peakRssMiB = memory.stop()
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    const code = await exited
    return { peakRssMiB, output, code }
  }
  return { stop, exited }
}

function startWorker(databaseUrl, redis, prefix, index) {
  // The worker needs a payment provider; the drained kind (order.send_confirmation) asks none.
  const env = { ...process.env, DATABASE_URL: databaseUrl, PAYMENT_PROVIDER: 'mockpay', MOCKPAY_WEBHOOK_SECRET: mockpaySecret, LOG_LEVEL: 'warn', WORKER_CONCURRENCY: concurrency, WORKER_ID: `bench-${index}`, REDIS_KEY_PREFIX: prefix, JOB_POLL_INTERVAL_MS: pollIntervalMs }
  delete env.REDIS_URL
  if (redis) env.REDIS_URL = redisUrl
  return startProcess([jitiCli, 'scripts/worker.ts'], env)
}

function startPeer(databaseUrl, mode) {
  const env = { ...process.env, DATABASE_URL: databaseUrl, GRAPHILE_MODE: mode, WORKER_CONCURRENCY: concurrency, JOB_POLL_INTERVAL_MS: pollIntervalMs }
  return startProcess([peerScript], env)
}

async function waitUntil(check, timeoutMs, describe) {
  for (let waited = 0; ; waited += 100) {
    const value = await check()
    if (value === true) return
    if (waited > timeoutMs) throw new Error(describe(value))
    await sleep(100)
  }
}

// Idle: the LISTEN has committed, so a NOTIFY sent now reaches that process.
const waitListening = (sql, processes, pattern) => waitUntil(async () => {
  const [{ listening }] = await sql`select count(*)::int as listening from pg_stat_activity
    where datname = current_database() and state = 'idle' and query ilike ${pattern}`
  return listening === processes || listening
}, 60_000, listening => `only ${listening} of ${processes} workers started`)

async function resetAndSeed(sql) {
  await sql`truncate jobs, orders, mailbox, side_effects, tenants cascade`
  await sql`truncate graphile_worker._private_jobs`
  await sql`insert into tenants (id, name) values ('ten_bench', 'bench')`
  await sql`insert into orders (id, tenant_id, cart_id, currency, amount, payment_method, items, customer, request_id)
    select 'ord_bench_' || i, 'ten_bench', 'cart_' || i, 'IDR', 150000, 'card', '[{"sku":"SKU-1","quantity":2,"unitPrice":75000}]', '{"email":"b@example.com"}', 'req_bench'
    from generate_series(1, ${jobCount}) i`
}

const waitForEmails = sql => waitUntil(async () => {
  const [{ emails }] = await sql`select count(*)::int as emails from mailbox`
  return emails === jobCount || emails
}, 300_000, emails => `drain did not finish: ${emails}/${jobCount} emails`)

/** The common measure: release → last effect; exactly one email and one marker per order. */
async function measure(sql, releasedAt) {
  const [timing] = await sql`select extract(epoch from max(created_at) - ${releasedAt}::timestamptz) * 1000 as ms,
    count(*)::int as emails, (select count(*)::int from side_effects) as markers from mailbox`
  if (timing.emails !== jobCount) throw new Error(`expected ${jobCount} emails, found ${timing.emails}`)
  if (timing.markers !== jobCount) throw new Error(`expected ${jobCount} side-effect markers, found ${timing.markers}`)
  return Number(timing.ms)
}

const row = (workers, worker, lock, ms, maxAttempt, peakRssMiB) => ({
  'workers': workers,
  'worker': worker,
  'lock / mode': lock,
  'jobs': jobCount,
  'drain ms': Math.round(ms),
  'jobs/s': Math.round(jobCount / (ms / 1000)),
  'max attempt': maxAttempt,
  'peak RSS MiB': peakRssMiB,
  // Unrounded, for the ratios; not a column.
  'rate': jobCount / ms,
})

async function drain(sql, databaseUrl, workers, redis) {
  await resetAndSeed(sql)
  // Not due until every worker listens, so the slowest worker's start-up is not measured.
  await sql`insert into jobs (id, kind, dedupe_key, payload, resource_id, max_attempts, run_at)
    select 'job_bench_' || i, 'order.send_confirmation', 'ord_bench_' || i, jsonb_build_object('orderId', 'ord_bench_' || i), 'order:ord_bench_' || i, 8, now() + interval '1 hour'
    from generate_series(1, ${jobCount}) i`
  const prefix = `bench:${randomUUID()}:`
  const started = Array.from({ length: workers }, (_, i) => startWorker(databaseUrl, redis, prefix, i))
  let stopped
  let releasedAt
  try {
    await waitListening(sql, workers, listenQuery.ours)
    // One statement makes the jobs due and wakes the workers at its commit, as graphile-worker's add_jobs does.
    const [release] = await sql`with released as (update jobs set run_at = now() returning 1)
      select now()::text as "releasedAt", (select count(*) from released), pg_notify('jobs_ready', '')`
    releasedAt = release.releasedAt
    await waitUntil(async () => {
      const [{ done }] = await sql`select count(*)::int as done from jobs where status = 'completed'`
      return done === jobCount || done
    }, 300_000, done => `drain did not finish: ${done}/${jobCount}`)
  }
  finally {
    stopped = await Promise.all(started.map(worker => worker.stop()))
  }
  const ms = await measure(sql, releasedAt)
  const [{ maxAttempt }] = await sql`select max(attempt)::int as "maxAttempt" from jobs`
  return row(workers, ours, redis ? 'Redis' : 'in-process (no Redis)', ms, maxAttempt, Math.max(...stopped.map(s => s.peakRssMiB)))
}

async function drainPeer(sql, databaseUrl, processes, mode) {
  await resetAndSeed(sql)
  const started = Array.from({ length: processes }, () => startPeer(databaseUrl, mode))
  let stopped
  let releasedAt
  try {
    await waitListening(sql, processes, listenQuery.peer)
    // run_at defaults to the statement's now(); add_jobs notifies the workers at its commit.
    const [release] = await sql`select now()::text as "releasedAt", (select count(*) from graphile_worker.add_jobs((
      select array_agg(row('order.send_confirmation', json_build_object('orderId', 'ord_bench_' || i), null, null, 8, null, null, null)::graphile_worker.job_spec)
      from generate_series(1, ${jobCount}) i)))`
    releasedAt = release.releasedAt
    await waitForEmails(sql)
  }
  finally {
    stopped = await Promise.all(started.map(peer => peer.stop()))
  }
  const failed = stopped.find(s => s.code !== 0)
  if (failed) throw new Error(`a graphile-worker process exited with code ${failed.code}`)
  // graphile-worker deletes a job when it completes; stop() has flushed batched completions.
  const [{ left }] = await sql`select count(*)::int as "left" from graphile_worker._private_jobs`
  if (left !== 0) throw new Error(`${left} graphile-worker jobs not completed`)
  const ms = await measure(sql, releasedAt)
  const maxAttempt = Math.max(...stopped.map(s => Number(/^max-attempt (\d+)$/m.exec(s.output)?.[1] ?? Number.NaN)))
  return row(processes, peerModes[mode], 'row locks in Postgres (SKIP LOCKED)', ms, maxAttempt, Math.max(...stopped.map(s => s.peakRssMiB)))
}

/**
 * What one job costs: Postgres round trips (the workers' connections through a counting proxy),
 * WAL flushes (fsyncs, the commit's price on this disk; concurrent commits share one) and Redis
 * commands, over one more drain by one process, untimed (the proxy adds a hop).
 */
async function costPerJob(sql, databaseUrl, worker, run) {
  const target = new URL(databaseUrl)
  const proxy = await startTurnsProxy({ host: target.hostname, port: Number(target.port || 5432) })
  const proxied = new URL(databaseUrl)
  proxied.port = String(proxy.port)
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  // The commands a client sends for locks: SET NX (acquire) and the owner-checked scripts (renew,
  // release); the GET and DEL a script runs inside Redis are counted by Redis too, and left out here.
  const redisCalls = async () => [...(await redis.info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)]
    .filter(([, command]) => ['set', 'eval', 'evalsha', 'exists'].includes(command))
    .reduce((sum, [, , calls]) => sum + Number(calls), 0)
  const walSyncs = async () => {
    // Backends report their WAL statistics at exit or within a second; the workers have exited.
    await sleep(1500)
    const [{ syncs }] = await sql`select wal_sync::bigint as syncs from pg_stat_wal`
    return Number(syncs)
  }
  try {
    await walSyncs()
    const syncsBefore = await walSyncs()
    const callsBefore = await redisCalls()
    const turnsBefore = proxy.turns()
    await run(proxied.toString())
    const turns = proxy.turns() - turnsBefore
    const syncs = await walSyncs() - syncsBefore
    const calls = await redisCalls() - callsBefore
    return { 'worker': worker, 'jobs': jobCount, 'Postgres round trips / job': (turns / jobCount).toFixed(2), 'WAL flushes / job': (syncs / jobCount).toFixed(3), 'Redis commands / job': (calls / jobCount).toFixed(2) }
  }
  finally {
    await redis.quit()
    await proxy.close()
  }
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
    await waitUntil(async () => {
      const [{ ready }] = await sql`select to_regclass('public.jobs') is not null as ready`
      return ready
    }, 60_000, () => 'migrations did not run')
  }
  finally {
    await migrator.stop()
  }
  // graphile-worker installs its schema once here, so no row times a migration.
  const migration = startPeer(databaseUrl.toString(), 'migrate')
  await migration.exited
  const { code } = await migration.stop()
  if (code !== 0) throw new Error(`graphile-worker's migration exited with code ${code}`)
  // Rows that are compared run back to back (ours with Redis next to the peer at 1 and at 2
  // processes), so drift in the machine's load moves a ratio less; the table keeps its order.
  const runs = [
    () => drain(sql, databaseUrl.toString(), 1, true),
    ...Object.keys(peerModes).map(mode => () => drainPeer(sql, databaseUrl.toString(), 1, mode)),
    () => drain(sql, databaseUrl.toString(), 2, true),
    ...Object.keys(peerModes).map(mode => () => drainPeer(sql, databaseUrl.toString(), 2, mode)),
    () => drain(sql, databaseUrl.toString(), 4, true),
    ...[1, 2, 4].map(workers => () => drain(sql, databaseUrl.toString(), workers, false)),
  ]
  const rows = []
  for (const run of runs) rows.push(await run())
  const order = r => [ours, ...Object.values(peerModes)].indexOf(r.worker) * 100 + (r['lock / mode'] === 'Redis' ? 0 : 10) + r.workers
  rows.sort((a, b) => order(a) - order(b))
  // The rate column is for the ratios below, not the table.
  const table = rows.map(row => Object.fromEntries(Object.entries(row).filter(([name]) => name !== 'rate')))
  const settings = `${jobCount} order.send_confirmation jobs, WORKER_CONCURRENCY=${concurrency} per process`
  console.log(`\nworker drain: ${settings}`)
  console.table(table)
  const rate = (workers, worker, lock = '') => rows.find(r => r.workers === workers && r.worker === worker && r['lock / mode'].startsWith(lock)).rate
  const times = ratio => `${ratio.toFixed(2)}×`
  const verdict = ratio => `${times(ratio)} — ${ratio >= 1 ? 'met' : 'not met'}`
  const target = rate(1, ours, 'Redis') / rate(1, peerModes.default)
  const beyond = rate(1, ours, 'Redis') / rate(1, peerModes.batched)
  const lines = [
    `target: worker drain ≥ 1.0× graphile-worker (same job, same run): ${verdict(target)}`,
    `beyond: worker drain ≥ 1.0× graphile-worker with batched completion: ${verdict(beyond)}`,
    `2 processes / 1: ours (Redis lock) ${times(rate(2, ours, 'Redis') / rate(1, ours, 'Redis'))}, graphile-worker ${times(rate(2, peerModes.default) / rate(1, peerModes.default))} (batched completion ${times(rate(2, peerModes.batched) / rate(1, peerModes.batched))})`,
    `${os.cpus().length} CPU cores on this machine, shared by the worker processes and Postgres`,
    `2 workers / 1: Redis ${times(rate(2, ours, 'Redis') / rate(1, ours, 'Redis'))}, in-process ${times(rate(2, ours, 'in') / rate(1, ours, 'in'))}`
    + `; Redis lock / in-process (1 worker): ${times(rate(1, ours, 'Redis') / rate(1, ours, 'in'))}`,
  ]
  console.log(lines.join('\n'))
  const costs = [
    await costPerJob(sql, databaseUrl.toString(), `${ours}, Redis lock`, url => drain(sql, url, 1, true)),
    ...await Object.entries(peerModes).reduce(async (done, [mode, name]) => [...await done, await costPerJob(sql, databaseUrl.toString(), name, url => drainPeer(sql, url, 1, mode))], []),
  ]
  console.log('\ncost per job, 1 process (one more drain each, untimed, through a round-trip counting proxy)')
  console.table(costs)
  const written = writeDrainSection([
    `${settings}, drained by standalone worker processes: ours (\`npm run worker\`) and, in the same run on the same database server, graphile-worker ${graphileVersion} (\`bench/graphile-peer.mjs\`) doing the same unit of work (read the order; insert the side-effect marker and the email in one transaction), with its defaults and with batched completion (local queue of concurrency + 1 jobs, completeJobBatchDelay 0). Time for every row from the now() of the statement that made the jobs due to the last email's created_at (the now() of the transaction that wrote it), read from the database; peak RSS of the largest worker process.`,
    '',
    markdownTable(table),
    '',
    ...lines.map(line => `- ${line}.`),
    '',
    'Cost per job, 1 process: one more drain each, untimed, with the worker\'s connections through a proxy that counts round trips (`bench/pg-turns-proxy.mjs`); WAL flushes from `pg_stat_wal.wal_sync` (the fsyncs commits wait for; commits at the same moment share one); Redis commands sent for locks (SET NX, the owner-checked release and renewal scripts) from `INFO commandstats`.',
    '',
    markdownTable(costs),
  ])
  console.log(written ? '\nfilled in the drain section of docs/benchmarks.md' : '\ndocs/benchmarks.md has no pending drain section (run `npm run bench` to write a new document): left as it is')
}
finally {
  await sql.end()
  await admin.unsafe(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
  await admin.end()
}
