// Throughput, latency and memory of the idempotency layer against the built server on loopback
// (`npm run bench`). Needs the build (`npm run build`) and a Postgres to create a scratch database in
// (BENCH_POSTGRES_URL, default the local server) and Redis (BENCH_REDIS_URL); the embedded rows use
// PGlite in a temporary folder.
// Besides the rates, two counts per new order: the commits in the bench database (from
// pg_stat_database) and the Postgres round trips (through bench/pg-turns-proxy.mjs).
// Two rows run on production topologies the bench starts itself: PgBouncer (Debian's `pgbouncer`) in
// transaction mode, and a three-master Redis Cluster.
// Prints a table and ratios and writes docs/benchmarks.md (drain.mjs adds its section). Bounded:
// each scenario runs BENCH_SECONDS (default 8) seconds after a warm-up of BENCH_WARMUP_SECONDS
// (default 3, at most BENCH_SECONDS); the round-trip count runs 3 s after 1 s. Exits non-zero when
// the duplicate storm did not create exactly one order per key.
import { spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import Redis from 'ioredis'
import postgres from 'postgres'
import { startPgbouncer } from '../tests/support/pgbouncer.mjs'
import { startRedisCluster } from '../tests/support/redis-topology-servers.mjs'
import { benchApplicationName, costMeter } from './cost.mjs'
import { samplePeakRss } from './memory.mjs'
import { deleteSeededRows, expiredRowsLeft, runRetention, seedExpiredRows } from './retention.mjs'
import { summarizeProfiles } from './profile.mjs'
import { startTurnsProxy } from './pg-turns-proxy.mjs'
import { paidRoundTripsBySteps } from './paid-steps.mjs'
import { cpuSpeedCheckMs, describeEnvironment, writeBenchmarks } from './report.mjs'
import { startPayer, startStandInPayer } from './payer.mjs'
import { mockpaySecret, trackedSkus, webhookSecret, workload } from './requests.mjs'
import { runStorm } from './storm.mjs'

const adminUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
/** Every Redis key of this run is under it (each server group under a prefix of its own), and deleted at the end. */
const redisRunPrefix = `bench:${randomBytes(6).toString('hex')}:`
const redisPrefix = () => `${redisRunPrefix}${randomBytes(6).toString('hex')}:`
const seconds = Number(process.env.BENCH_SECONDS ?? 8)
const warmUpSeconds = Number(process.env.BENCH_WARMUP_SECONDS ?? Math.min(seconds, 3))
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16)
const stormCopies = Number(process.env.BENCH_STORM_COPIES ?? 4)
const stormInstances = 2
const deployedInstances = 2
/** Rows past their retention seeded in each of the three tables retention empties. */
const retentionRowsPerTable = Number(process.env.BENCH_RETENTION_ROWS ?? 1_000_000)
/** BENCH_ONLY=newKey,replay runs those scenarios (and the floor) and prints their tables, nothing else. */
const only = process.env.BENCH_ONLY?.split(',').map(name => name.trim()).filter(Boolean)
/**
 * A paid order's app + Postgres CPU as deployed before the pipeline's diet (9.9 ms + 5.4 ms, the run
 * of 2026-12-06): the CPU target is a share of it.
 */
const PAID_ORDER_CPU_BEFORE_MS = 15.3
/**
 * The same with the provider's work out of the app (the "Stripe stand-in" row): that row's app +
 * Postgres CPU on the code before the pipeline's diet (4ee0876), the bench's own backends left out,
 * the mean of three runs (11.1–12.9 ms).
 */
const PAID_ORDER_STRIPE_CPU_BEFORE_MS = 12.2
/** BENCH_ONLY names that profile a workload instead of measuring it. */
// Rows printed on their own (BENCH_ONLY), not scenarios.
const profiles = ['profile', 'profileStripe', 'profileNewKey', 'profileReplay', 'paidRoundTrips']
// Counting round trips needs no long run, only enough orders to amortise the background traffic.
const roundTripSeconds = 3
const roundTripWarmUpSeconds = 1
const serverEntry = `${process.env.APP_BUILD_ROOT ?? '.'}/.output/server/index.mjs`
const opsToken = `ops_bench_${randomUUID()}`
const [loadAtStart] = loadavg()
// Only a full run reports it.
const speedAtStart = only ? undefined : cpuSpeedCheckMs()

if (!existsSync(serverEntry)) {
  console.error(`No build at ${serverEntry}: run \`npm run build\` first.`)
  process.exit(1)
}
if (!Number.isInteger(stormCopies / stormInstances) || stormCopies < stormInstances) {
  console.error(`BENCH_STORM_COPIES must be a positive multiple of ${stormInstances} (half of a key's copies go to each instance).`)
  process.exit(1)
}

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

const floorEntry = new URL('./floor-server.mjs', import.meta.url).pathname
/** The order's own writes without the app around them: TypeScript on the app's modules, run through jiti. */
const writesEntry = new URL('./writes-server.ts', import.meta.url).pathname
const projectRoot = fileURLToPath(new URL('..', import.meta.url))
const jitiCli = `${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`
/** How long the jobs of a run with the worker on may take to drain after its load stopped. */
const drainTimeoutMs = 120_000

/** What every process of the app gets: what a deployment sets, then the scenario's `env`. */
const appEnv = env => ({
  ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'warn', OPS_TOKEN: opsToken,
  WEBHOOK_STANDARD_SECRET: webhookSecret, WEBHOOK_STRIPE_SECRET: randomUUID(),
  MIDTRANS_SERVER_KEY: randomUUID(), WORKER_ENABLED: 'false', REDIS_KEY_PREFIX: redisPrefix(),
  // A payment provider, as a deployment has: each order gets its payment.create_intent job.
  PAYMENT_PROVIDER: 'mockpay', MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: mockpaySecret, ...env,
})

/**
 * A server process; `stop()` ends it and resolves to its peak RSS in MiB. Its stdout (the log) is
 * discarded; its stderr, where start-up failures go, is shown unless `stderr` is 'ignore'.
 */
async function startServer(env, entry, stderr, nodeArgs = []) {
  const port = await freePort()
  const child = spawn(process.execPath, [...nodeArgs, entry], {
    env: { ...appEnv(env), PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', stderr],
  })
  const memory = samplePeakRss(child.pid)
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 300; i++) {
    const ready = await fetch(`${url}/api/ready`).then(r => r.ok, () => false)
    if (ready) {
      return {
        url,
        pid: child.pid,
        stop: () => new Promise((resolve, reject) => {
          const peakRssMiB = memory.stop()
          // A server that ended before it was told to would never emit 'exit' again, and its figures are void.
          if (child.exitCode !== null || child.signalCode !== null) {
            reject(new Error(`the server at ${url} exited during the scenario (${child.signalCode ?? `code ${child.exitCode}`})`))
            return
          }
          child.once('exit', () => resolve(peakRssMiB))
          child.kill('SIGTERM')
        }),
      }
    }
    await sleep(100)
  }
  memory.stop()
  child.kill('SIGKILL')
  throw new Error('server did not become ready')
}

const createTenant = url => fetch(`${url}/api/ops/tenants`, {
  method: 'POST', headers: { 'content-type': 'application/json', 'authorization': `Bearer ${opsToken}` }, body: '{"name":"bench"}',
}).then(r => r.json())

/** Counts for the tracked-stock workload's SKUs, more than any run reserves. */
async function trackStock(url, secretKey) {
  for (const sku of trackedSkus) {
    const response = await fetch(`${url}/api/inventory/${sku}`, { method: 'PUT', headers: { 'content-type': 'application/json', 'authorization': `Bearer ${secretKey}` }, body: '{"onHand":1000000000}' })
    if (response.status !== 200) throw new Error(`PUT /api/inventory/${sku} answered ${response.status}: ${await response.text()}`)
  }
}

/** `urls`: one server, or several that autocannon's connections are spread over round-robin. */
async function run(urls, requests, duration) {
  const targets = [urls].flat().map(url => `${url}${requests.path}`)
  // A replay scenario replays what its first request stored. A new-key one sends nothing but what
  // autocannon counts, so that every order created while it runs is one of its 201 responses.
  if (requests.replay) {
    const first = requests.next()
    await fetch(targets[0], { method: 'POST', headers: first.headers, body: first.body })
  }
  return autocannon({
    url: targets.length === 1 ? targets[0] : targets, method: requests.method ?? 'POST', connections, duration,
    // A request may name its own path (a confirmation between orders); otherwise the target's.
    requests: [{ setupRequest: request => ({ ...request, ...requests.next() }) }],
  })
}

/** Deletes the keys the run's servers left in Redis (cached replies live as long as their records). */
async function deleteRedisKeys(prefix) {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 1000 })) {
      if (keys.length) await redis.unlink(...keys)
    }
  }
  finally {
    redis.disconnect()
  }
}

/** Starts a server per environment given; if one fails to start, stops the others. */
async function startServers(envs, entry, stderr = 'inherit', nodeArgs = []) {
  const started = await Promise.allSettled(envs.map(env => startServer(env, entry, stderr, nodeArgs)))
  const servers = started.filter(outcome => outcome.status === 'fulfilled').map(outcome => outcome.value)
  const failed = started.find(outcome => outcome.status === 'rejected')
  if (!failed) return servers
  await Promise.all(servers.map(server => server.stop()))
  throw failed.reason
}

/** Runs `measure` against the servers, then stops them (whatever happened) and adds their peak RSS. */
async function measureOn(servers, measure) {
  const measured = await measure().catch(async (error) => {
    await Promise.all(servers.map(server => server.stop()))
    throw error
  })
  const peaks = await Promise.all(servers.map(server => server.stop()))
  return { ...measured, peakRssMiB: Math.max(...peaks) }
}

/**
 * Each scenario starts from a quiet database: the rows the previous one wrote are vacuumed and
 * checkpointed now, not by autovacuum and the checkpointer in the middle of the next measurement.
 */
async function settlePostgres() {
  await sql`vacuum analyze`
  await sql`checkpoint`
}

/**
 * Counts what `read()` counts over the measured run, per order it created (201 responses). Each
 * reading waits `settleMs` first: the warm-up's tail stays out of the count, the run's own is in.
 * `ownCost` is what one reading adds to the count itself.
 */
function perOrder(read, settleMs, ownCost = 0) {
  let before
  return {
    async start() {
      await sleep(settleMs)
      before = await read()
    },
    async stop(units) {
      await sleep(settleMs)
      const count = await read() - before - ownCost
      return { count, orders: units, perOrder: count / units }
    },
  }
}

/**
 * Postgres 15 backends flush their statistics lazily, when they go idle and at most once a second;
 * one that last flushed less than a second before going idle keeps its counts until a 10 s idle
 * timer fires (PGSTAT_IDLE_INTERVAL): read 1.5 s after a run, a fifth of its commits were missing.
 * 11 s after the load stopped every backend has flushed.
 */
const statsFlushMs = 11_000

/** Transactions committed in the bench database; read in a fresh transaction, so its snapshot is new. */
async function committedTransactions() {
  const [{ commits }] = await sql.begin(async (tx) => {
    await tx`select pg_stat_clear_snapshot()`
    return tx`select xact_commit as commits from pg_stat_database where datname = current_database()`
  })
  return Number(commits)
}

/** Commits per new order; the reading taken before the run is one commit of the count. */
const commitsPerOrder = () => perOrder(committedTransactions, statsFlushMs, 1)

/**
 * What a run's figures are per: responses that did what the workload asked (orders created, 201;
 * replays or deliveries answered, 200) — in a `paid` run the orders only, their payments being part
 * of each order's cost; in a `refused` run its 404 problems.
 */
const unitsOf = (result, mode) => {
  if (mode === 'paid') return result.statusCodeStats['201']?.count ?? 0
  // A refused request's unit is its 404 problem.
  if (mode === 'refused') return result.statusCodeStats['404']?.count ?? 0
  return Object.entries(result.statusCodeStats).filter(([code]) => code.startsWith('2')).reduce((sum, [, { count }]) => sum + count, 0)
}

/** The row's rate: requests a second, or in a `paid` run orders a second (the confirmations between them not counted). */
const rateOf = (result, mode) => (mode === 'paid' ? unitsOf(result, mode) / result.duration : result.requests.average)

/** Whether a job is not yet run to an end: queued (due or not), running, or failed and waiting for a retry. */
async function anyOpenJob() {
  // Each test an index's predicate (jobs_ready_idx, jobs_running_heartbeat_idx): no scan of the jobs the runs completed.
  const [{ open }] = await sql`select exists (select 1 from jobs where status in ('queued', 'failed')) or exists (select 1 from jobs where status = 'running') as open`
  return open
}

/** Resolves to how long the jobs took to drain after the load stopped; fails after `drainTimeoutMs`. */
async function jobsDrained(worker) {
  const started = performance.now()
  while (await anyOpenJob()) {
    if (worker && !worker.running()) throw new Error('the worker process exited during the scenario')
    if (performance.now() - started > drainTimeoutMs) throw new Error(`jobs still open ${drainTimeoutMs / 1000} s after the load stopped`)
    await sleep(50)
  }
  return Math.round(performance.now() - started)
}

/** A standalone worker process (`npm run worker`) for servers that run none; mockpay delivers to `webhookBase`. */
function startWorkerProcess(env, webhookBase) {
  const child = spawn(process.execPath, [jitiCli, 'scripts/worker.ts'], {
    cwd: projectRoot,
    env: { ...appEnv(env), WORKER_ID: 'bench-worker', MOCKPAY_WEBHOOK_URL: `${webhookBase}/api/webhooks/mockpay` },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const exited = new Promise(resolve => child.once('exit', resolve))
  return {
    pid: child.pid,
    /** A worker that ended before it was told to ran no jobs, and the run's figures are void. */
    running: () => child.exitCode === null && child.signalCode === null,
    stop: () => (child.kill('SIGTERM'), exited),
  }
}

/**
 * Where a run with the Stripe stand-in as its provider finds it: the port it will listen on and the
 * app's settings for it (its keys made up per run, in the shapes the app checks).
 */
async function stripeStandInPlan() {
  const port = await freePort()
  const secretKey = `sk_test_bench${randomUUID().replaceAll('-', '')}`
  const webhookSecret = `whsec_bench${randomUUID().replaceAll('-', '')}`
  return {
    port, secretKey, webhookSecret,
    env: { PAYMENT_PROVIDER: 'stripe', MOCKPAY_ENABLED: 'false', STRIPE_SECRET_KEY: secretKey, STRIPE_API_BASE: `http://127.0.0.1:${port}`, WEBHOOK_STRIPE_SECRET: webhookSecret },
  }
}

/**
 * The Stripe stand-in (`npm run stand-in -- stripe`) in its own process, as `plan` says, sending its
 * signed events to `webhookUrl`: a provider whose work is not the app's, its CPU metered apart.
 */
async function startStripeStandIn(plan, webhookUrl) {
  const child = spawn(process.execPath, [jitiCli, 'scripts/stand-in.ts', 'stripe', '--port', String(plan.port), '--webhook-url', webhookUrl, '--secret-key', plan.secretKey, '--webhook-secret', plan.webhookSecret], {
    cwd: projectRoot, stdio: ['ignore', 'ignore', 'inherit'],
  })
  const exited = new Promise(resolve => child.once('exit', resolve))
  const url = `http://127.0.0.1:${plan.port}`
  const stop = () => (child.kill('SIGTERM'), exited)
  for (let i = 0; i < 300; i++) {
    if (await fetch(`${url}/_stand-in/events?type=none`).then(r => r.ok, () => false)) return { url, pid: child.pid, stop }
    if (child.exitCode !== null) break
    await sleep(100)
  }
  await stop()
  throw new Error('the Stripe stand-in did not start')
}

/**
 * One measured run on `instances` servers sharing `env`, with the load spread over them.
 * `workerProcess` adds a standalone worker beside servers that run none. With `drain` the run
 * ends only once every job its orders queued has run, and its cost counts them: the table then
 * starts without open jobs, so that no earlier scenario's backlog is drained and counted.
 * `meter` counts something over the measured run; `stderr: 'ignore'` silences the servers.
 * `provider: 'stripe'` makes the Stripe stand-in, in its own process, the servers' payment provider
 * (its events sent to the first server), its CPU metered apart; a paid run pays on it.
 * `server: 'floor'` runs the workload on the one-INSERT floor's bare server instead of the app.
 * `alongside(urls)` prepares work after the warm-up and resolves to `{ done }`, the work started to
 * run beside the measured run: the result's `alongside` holds what it prepared and `done` settled.
 * A scenario on Postgres counts the rows it left for retention (`retained`, per unit), unless
 * `alongside` changes those tables too.
 */
async function scenario(label, env, kind, mode, { meter, duration = seconds, warmUp = warmUpSeconds, stderr, instances = 1, workerInstances = instances, workerProcess = false, drain = false, nodeArgs, alongside, provider, server = kind } = {}) {
  // The floors: bare node:http servers, not the app.
  const reference = { floor: { entry: floorEntry, nodeArgs: [] }, writes: { entry: writesEntry, nodeArgs: [jitiCli] } }[server]
  const floor = reference !== undefined
  if (drain) await sql.unsafe('do $$ begin if to_regclass(\'jobs\') is not null then delete from jobs; end if; end $$')
  await settlePostgres()
  const standInPlan = provider === 'stripe' ? await stripeStandInPlan() : undefined
  // With `workerInstances` fewer than the instances, the first ones run the in-app worker and the rest serve requests only.
  const envs = Array.from({ length: instances }, (_, index) => ({ ...env, ...standInPlan?.env, ...(index >= workerInstances ? { WORKER_ENABLED: 'false' } : {}) }))
  const servers = await startServers(envs, reference?.entry ?? serverEntry, stderr, reference?.nodeArgs ?? nodeArgs)
  const urls = servers.map(server => server.url)
  const worker = workerProcess ? startWorkerProcess(env, urls[0]) : undefined
  let stopPayer
  let standIn
  return measureOn(servers, async () => {
    try {
      standIn = standInPlan && await startStripeStandIn(standInPlan, `${urls[0]}/api/webhooks/stripe`)
      // The floors need no tenant key: they take the same order requests and ignore the credentials.
      const tenant = floor ? { secretKey: 'none' } : await createTenant(urls[0])
      if (kind === 'trackedOrder') await trackStock(urls[0], tenant.secretKey)
      const payer = mode !== 'paid' ? undefined : standIn ? await startStandInPayer(sql, standIn.url) : await startPayer(sql)
      stopPayer = payer?.stop
      // Until every order is paid and every job has run: a payment creates jobs, and a job still
      // creating an intent when the unpaid ones were paid leaves one more to pay.
      const settle = async () => {
        if (!payer) return drain ? jobsDrained(worker) : undefined
        const started = performance.now()
        do await jobsDrained(worker)
        while (await payer.payRest(urls[0]) > 0)
        return Math.round(performance.now() - started)
      }
      await run(urls, workload(kind, mode, tenant.secretKey, payer), warmUp) // warm-up: JIT, pools, caches
      await settle()
      // Counted on the bench's Postgres, and only where nothing but the run's requests changes its rows.
      const countsRetained = !floor && Boolean(env.DATABASE_URL) && !alongside
      const retainedBefore = countsRetained ? await retainedRows() : 0
      // The writes floor writes a new-key order's rows: its index entries are the data model's.
      const countsIndexEntries = (countsRetained || kind === 'writes') && mode === 'new'
      const indexEntriesBefore = countsIndexEntries ? await indexEntries() : 0
      const beside = await alongside?.(urls)
      await meter?.start()
      const cost = costMeter(sql, { appPids: () => servers.map(server => server.pid), workerPids: () => (worker ? [worker.pid] : []), providerPids: standIn && (() => [standIn.pid]) })
      await cost.start()
      const result = await run(urls, workload(kind, mode, tenant.secretKey, payer), duration)
      const units = unitsOf(result, mode)
      const drainMs = await settle()
      const costs = await cost.stop(units)
      const count = await meter?.stop(units)
      const besideDone = beside && { ...beside, done: await beside.done }
      // The request log's last batch of the run is written within its flush interval.
      if (!floor) await sleep(200)
      if (kind === 'writes') await sleep(200)
      const retained = countsRetained ? (await retainedRows() - retainedBefore) / units : undefined
      const indexEntriesPerUnit = countsIndexEntries ? (await indexEntries() - indexEntriesBefore) / units : undefined
      // A paid run's orders, warm-up's included, by status: every one paid, or the run's figures are not a paid order's.
      const check = payer && `orders: ${await payer.outcome()}`
      return { label, result, units, rate: rateOf(result, mode), check, count, cost: { ...costs, embedded: !floor && !env.DATABASE_URL }, drainMs, alongside: besideDone, retained, indexEntries: indexEntriesPerUnit }
    }
    finally {
      await stopPayer?.()
      await worker?.stop()
      await standIn?.stop()
    }
  })
}

/**
 * Postgres round trips per order (or replay): a scenario's workload on servers that reach Postgres
 * through the counting proxy. Not a throughput row: the proxy adds a hop to every round trip.
 * Whatever else the servers send meanwhile (request-log batches, notifications, readiness checks,
 * and with the worker on the jobs' statements) is counted too, and so amortised over the orders.
 */
async function roundTripScenario(env, mode = 'new', options = {}, kind = 'order', { byStatement = false } = {}) {
  const target = new URL(env.DATABASE_URL)
  const proxy = await startTurnsProxy({ host: target.hostname, port: Number(target.port || 5432) }, { byStatement })
  const proxied = new URL(target)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(proxy.port)
  // With byStatement, the turns of the measured run by the statements they carried.
  let tallyBefore
  const meter = perOrder(proxy.turns, 1000)
  try {
    // A second of quiet around each reading: the request log's last batch of the run is in.
    const { count } = await scenario('through the round-trip counter', { ...env, DATABASE_URL: proxied.toString() }, kind, mode, {
      meter: { async start() { await meter.start(); tallyBefore = new Map(proxy.tally()) }, stop: meter.stop },
      duration: roundTripSeconds, warmUp: roundTripWarmUpSeconds, ...options,
    })
    if (!byStatement) return count
    const statements = proxy.tally().map(([label, turns]) => [label, (turns - (tallyBefore.get(label) ?? 0)) / count.orders]).filter(([, perOrder]) => perOrder > 0)
    return { ...count, statements }
  }
  finally {
    await proxy.close()
  }
}

/** A paid run's round trips by step, as table rows, each owner's sum last. */
function paidStepRows({ statements }) {
  const { rows, app, mockpay } = paidRoundTripsBySteps(statements)
  return [
    ...rows.map(({ step, owner, perOrder }) => ({ step, owner, 'round trips / order': perOrder.toFixed(2) })),
    { 'step': 'the app\'s', 'owner': 'app', 'round trips / order': app.toFixed(2) },
    { 'step': 'mockpay\'s (the provider\'s own work)', 'owner': 'mockpay', 'round trips / order': mockpay.toFixed(2) },
  ]
}

/**
 * The as-deployed new-key workload once more, its servers under `node --cpu-prof` (not a throughput
 * row: profiling slows them), until its jobs have drained: where the app processes' CPU goes.
 */
async function profileScenario(env, options, mode = 'paid') {
  // BENCH_PROFILE_DIR keeps the profiles (.cpuprofile, for Chrome's DevTools) there.
  const kept = process.env.BENCH_PROFILE_DIR
  const dir = kept ?? mkdtempSync(join(tmpdir(), 'ic-profile-'))
  try {
    const { units } = await scenario('profiled', env, 'order', mode, { ...options, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`] })
    return { orders: units, ...summarizeProfiles(dir) }
  }
  finally {
    if (!kept) rmSync(dir, { recursive: true, force: true })
  }
}

/** The profile's tables: each group's and each busiest function's CPU per order and share. */
function profileRows({ orders, groups, functions, nativeCalls }) {
  const row = column => ({ name, ms, share }) => ({ [column]: name, 'profiled ms per order': (ms / orders).toFixed(3), 'share': `${(share * 100).toFixed(1)} %` })
  return { groups: groups.map(row('where')), functions: functions.map(row('function (bundled server)')), nativeCalls: nativeCalls.map(row('native or Node.js call ← bundled function')) }
}

/** Rows in the tables retention empties (request_log_replays with request_log): what the hot path leaves behind for it. */
async function retainedRows() {
  const [{ rows }] = await sql`select (select count(*) from idempotency_records) + (select count(*) from jobs) + (select count(*) from request_log)
    + (select count(*) from request_log_replays) as rows`
  return Number(rows)
}

/**
 * Index entries in the bench database: for each table, the rows each of its indexes holds (all
 * rows, or those its predicate keeps), in one scan of the table. Counted before and after a run, the
 * difference is what the run's rows cost in index maintenance (live entries: an update that is not
 * HOT adds one more, which this does not see, and a new order updates nothing).
 */
async function indexEntries() {
  const indexes = await sql`
    select t.relname as "table", pg_get_expr(x.indpred, x.indrelid) as predicate
    from pg_index x join pg_class t on t.oid = x.indrelid join pg_namespace n on n.oid = t.relnamespace
    where n.nspname = 'public' and t.relkind = 'r'`
  const byTable = new Map()
  for (const { table, predicate } of indexes) byTable.set(table, [...(byTable.get(table) ?? []), predicate])
  let entries = 0
  for (const [table, predicates] of byTable) {
    const counts = predicates.map(predicate => (predicate ? `count(*) filter (where ${predicate})` : 'count(*)')).join(' + ')
    const [{ total }] = await sql.unsafe(`select (${counts})::bigint as total from "${table}"`)
    entries += Number(total)
  }
  return entries
}

/**
 * The new-key workload on tables holding a backlog: `retentionRowsPerTable` rows past their
 * retention seeded in each of idempotency_records, jobs and request_log after the warm-up. With
 * `retention`, the retention task is started through the ops API as the measured run starts: the
 * run's rate, set against the same backlog's with retention idle, is what retention's work costs the
 * hot path; the rows the task deleted over its own duration are its capacity, under that load.
 * Without, the seeded rows are deleted afterwards (the tables' size alone costs the hot path a little).
 */
async function backlogScenario(label, env, { retention }) {
  const seeding = postgres(databaseUrl.toString(), { max: 3, onnotice: () => {}, connection: { application_name: benchApplicationName } })
  try {
    const measured = await scenario(label, env, 'order', 'new', {
      async alongside([url]) {
        const seeded = await seedExpiredRows(seeding, retentionRowsPerTable)
        await settlePostgres()
        return { seeded, done: retention ? runRetention(url, opsToken) : undefined }
      },
    })
    const { seeded, done } = measured.alongside
    if (!retention) {
      await deleteSeededRows(seeding)
      return measured
    }
    const deleted = Object.values(done.counts).reduce((sum, count) => sum + count, 0)
    const { total: left } = await expiredRowsLeft(sql)
    return { ...measured, retention: { seeded, deleted, left, ms: done.ms, rowsPerSecond: deleted / (done.ms / 1000) } }
  }
  finally {
    await seeding.end()
  }
}

/** Two instances sharing the database and the Redis prefix; a warm-up storm, then the measured one. */
async function stormScenario(label, env, sql) {
  await settlePostgres()
  const stormEnv = { ...env, REDIS_KEY_PREFIX: redisPrefix() }
  const servers = await startServers(Array.from({ length: stormInstances }, () => stormEnv), serverEntry)
  return measureOn(servers, async () => {
    const storm = async duration => runStorm({
      urls: servers.map(server => server.url), tenant: await createTenant(servers[0].url), sql, connections, seconds: duration, copies: stormCopies,
    })
    const warmUp = await storm(warmUpSeconds)
    const measured = await storm(seconds)
    const problems = [...warmUp.problems.map(problem => `warm-up: ${problem}`), ...measured.problems]
    return { label, result: measured.result, rate: measured.result.requests.average, check: measured.check, storm: measured, problems }
  })
}

/** Ratios to the floor, as every table shows them. */
function rateRows(measured) {
  const floorRate = measured.floor.rate
  return Object.values(measured).map(({ label, result, rate, peakRssMiB, check }) => ({
    'scenario': label,
    'req/s': Math.round(rate),
    'p50 ms': result.latency.p50,
    'p99 ms': result.latency.p99,
    'peak RSS MiB': peakRssMiB,
    '× floor': (rate / floorRate).toFixed(2),
    'responses': Object.entries(result.statusCodeStats).map(([code, { count }]) => `${code}: ${count}`).join(', '),
    'errors': result.errors + result.timeouts,
    'check': check ?? '',
  }))
}

function printRates(measured) {
  console.log(`\n${connections} connections, ${seconds} s per scenario after a ${warmUpSeconds} s warm-up, loopback`)
  console.table(rateRows(measured))
}

const costFigure = value => (value === undefined ? '' : value.toFixed(2))

/** One row of the cost table: what one order (or replay) cost each kind of process, and Postgres's commits and round trips. */
function costRow({ label, cost, retained, indexEntries }, roundTrips) {
  return {
    'configuration': label,
    'per': `${cost.units} responses`,
    'app CPU ms': costFigure(cost.cpuMs.app),
    'worker process CPU ms': costFigure(cost.cpuMs.worker),
    // A provider in its own process (the Stripe stand-in): its work, not the app's.
    'provider CPU ms': costFigure(cost.cpuMs.provider),
    // Embedded, the database is PGlite inside the app: the Postgres server's figures are someone else's.
    'Postgres CPU ms': cost.embedded ? 'in app' : costFigure(cost.cpuMs.postgres),
    'Redis CPU ms': costFigure(cost.cpuMs.redis),
    // The bench's own process: sharing the cores, it caps the fastest rows.
    'load generator CPU ms': costFigure(cost.cpuMs.loadGenerator),
    'write commits': cost.embedded ? '' : costFigure(cost.writeCommits),
    'round trips': costFigure(roundTrips?.perOrder),
    // What it leaves in idempotency_records, jobs and request_log: the rows retention deletes later.
    'rows kept': retained === undefined ? '' : retained.toFixed(2),
    // Entries its rows added to the tables' indexes (new-key rows only).
    'index entries': indexEntries === undefined ? '' : indexEntries.toFixed(2),
  }
}

/** The full run's tables, targets and ratios, printed and written to docs/benchmarks.md. */
async function report(measured, { production, deployed, asDeployed }) {
  const commits = measured.newKey.count
  // Round trips of the configurations the cost table compares; with the worker on, the jobs' too.
  const roundTripsOf = {
    newKey: await roundTripScenario(production),
    trackedNewKey: await roundTripScenario(production, 'new', {}, 'trackedOrder'),
    replay: await roundTripScenario(production, 'replay'),
    deployedNewKey: await roundTripScenario(deployed, 'new', asDeployed),
    deployedPaid: await roundTripScenario(deployed, 'paid', asDeployed, 'order', { byStatement: true }),
    deployedReplay: await roundTripScenario(deployed, 'replay', asDeployed),
  }
  const roundTrips = roundTripsOf.newKey
  const profile = profileRows(await profileScenario(deployed, asDeployed))
  console.table(profile.groups)
  console.table(profile.functions)
  console.table(profile.nativeCalls)
  const rps = Object.fromEntries(Object.entries(measured).map(([name, { rate }]) => [name, rate]))
  const rows = rateRows(measured)
  printRates(measured)
  const costs = Object.entries(measured).filter(([, { cost }]) => cost).map(([name, row]) => costRow(row, roundTripsOf[name]))
  console.table(costs)

  // Retention against what the hot path leaves for it: the rows an order (with its jobs, its
  // webhooks and their request-log rows) adds to the three tables, at the new-key rates measured.
  const { retention } = measured.newKeyRetention
  const writers = ['newKey', 'deployedNewKey', 'deployedPaid'].map(name => ({ name, rowsPerOrder: measured[name].retained, rowsPerSecond: measured[name].retained * rps[name] }))
  const peakWriter = writers.reduce((a, b) => (b.rowsPerSecond > a.rowsPerSecond ? b : a))
  const retentionHeadroom = retention.rowsPerSecond / peakWriter.rowsPerSecond
  const duringRetention = rps.newKeyRetention / rps.newKey
  const retentionLines = [
    `seeded ${retention.seeded.toLocaleString('en-US')} rows past their retention (${retentionRowsPerTable.toLocaleString('en-US')} in each of idempotency_records, jobs, request_log);`
    + ` one retention run, started with the measured run of "${measured.newKeyRetention.label}", deleted ${retention.deleted.toLocaleString('en-US')}`
    + ` in ${(retention.ms / 1000).toFixed(1)} s (${retention.left.toLocaleString('en-US')} left for the next run)`,
    `retention capacity: ${Math.round(retention.rowsPerSecond).toLocaleString('en-US')} rows/s, under the new-key load`,
    ...writers.map(({ name, rowsPerOrder, rowsPerSecond }) => `rows written per second at the new-key rate of "${measured[name].label}": ${rowsPerOrder.toFixed(2)} rows per order × ${Math.round(rps[name])} orders/s = ${Math.round(rowsPerSecond).toLocaleString('en-US')} rows/s`),
    `the hot path with that backlog in the tables and retention idle: ${Math.round(rps.newKeyBacklog)} req/s, ${(rps.newKeyBacklog / rps.newKey).toFixed(2)}× its rate on the bench's small tables ("order, new key · Postgres + Redis")`,
    `the hot path while retention ran: ${Math.round(rps.newKeyRetention)} req/s, ${duringRetention.toFixed(2)}× its rate on the small tables, ${(rps.newKeyRetention / rps.newKeyBacklog).toFixed(2)}× with the backlog and retention idle`,
  ]
  for (const line of retentionLines) console.log(`retention: ${line}`)
  const { storm, problems } = measured.storm
  const toFloor = name => rps[name] / rps.floor
  const perNewOrder = ({ count, orders, perOrder }, what) => `${perOrder.toFixed(2)} (${count} ${what} / ${orders} orders)`
  const toWrites = name => rps[name] / rps.orderWrites
  const paidCpuMs = measured.deployedPaid.cost.cpuMs.app + measured.deployedPaid.cost.cpuMs.postgres
  const paidStripeCpuMs = measured.deployedPaidStripe.cost.cpuMs.app + measured.deployedPaidStripe.cost.cpuMs.postgres
  const paidRoundTrips = roundTripsOf.deployedPaid
  const paidSteps = paidRoundTripsBySteps(paidRoundTrips.statements)
  const targets = [
    // The app's own share: a new key against a bare server writing exactly its rows.
    ['new-key order ≥ 0.8× the order\'s own writes floor', `${toWrites('newKey').toFixed(2)}× (${toFloor('newKey').toFixed(2)}× the one-INSERT floor)`, toWrites('newKey') >= 0.8],
    ['webhook new event ≥ 0.8× the order\'s own writes floor', `${toWrites('webhookNew').toFixed(2)}×`, toWrites('webhookNew') >= 0.8],
    // The rows' diet: what the data model alone reaches.
    ['the order\'s own writes floor ≥ 0.5× the one-INSERT floor', `${toFloor('orderWrites').toFixed(2)}× (${measured.orderWrites.indexEntries.toFixed(1)} index entries per order)`, toFloor('orderWrites') >= 0.5],
    ['new-key order through PgBouncer (transaction mode) ≥ 0.7× direct', `${(rps.newKeyPooled / rps.newKey).toFixed(2)}×`, rps.newKeyPooled / rps.newKey >= 0.7],
    ['replay ≥ 2× the one-INSERT floor', `${toFloor('replay').toFixed(2)}× (a no-work GET /api/health: this build ${toFloor('liveness').toFixed(2)}×, node:http ${toFloor('floorLiveness').toFixed(2)}×)`, toFloor('replay') >= 2],
    ['as deployed replay ≥ 1.5× the one-INSERT floor', `${toFloor('deployedReplay').toFixed(2)}×`, toFloor('deployedReplay') >= 1.5],
    // The order's whole pipeline, its payment included.
    ['paid order as deployed: ≤ 10 Postgres round trips of the app\'s (mockpay\'s apart)', `${paidSteps.app.toFixed(2)} (${paidSteps.mockpay.toFixed(2)} more of mockpay's, ${perNewOrder(paidRoundTrips, 'round trips')} in all)`, paidSteps.app <= 10],
    [`paid order as deployed: app + Postgres CPU ≤ 60 % of ${PAID_ORDER_CPU_BEFORE_MS} ms`, `${paidCpuMs.toFixed(2)} ms (${Math.round(paidCpuMs / PAID_ORDER_CPU_BEFORE_MS * 100)} %)`, paidCpuMs <= 0.6 * PAID_ORDER_CPU_BEFORE_MS],
    [`paid order as deployed, the provider in its own process (Stripe stand-in): app + Postgres CPU ≤ 60 % of ${PAID_ORDER_STRIPE_CPU_BEFORE_MS} ms`, `${paidStripeCpuMs.toFixed(2)} ms (${Math.round(paidStripeCpuMs / PAID_ORDER_STRIPE_CPU_BEFORE_MS * 100)} %; the provider's own ${measured.deployedPaidStripe.cost.cpuMs.provider.toFixed(2)} ms apart)`, paidStripeCpuMs <= 0.6 * PAID_ORDER_STRIPE_CPU_BEFORE_MS],
    ['commits per new order = 1', perNewOrder(commits, 'commits'), commits.perOrder <= 1.05],
    ['Postgres round trips per new order ≤ 2', perNewOrder(roundTrips, 'round trips'), roundTrips.perOrder <= 2],
    ['commits per new order of 3 tracked SKUs = 1', perNewOrder(measured.trackedNewKey.count, 'commits'), measured.trackedNewKey.count.perOrder <= 1.05],
    ['Postgres round trips per new order of 3 tracked SKUs ≤ 2', perNewOrder(roundTripsOf.trackedNewKey, 'round trips'), roundTripsOf.trackedNewKey.perOrder <= 2],
    ['retention capacity ≥ 3× the hot path\'s rows written per second', `${retentionHeadroom.toFixed(2)}×`, retentionHeadroom >= 3],
    ['new-key order while retention works ≥ 0.9× its rate without', `${duringRetention.toFixed(2)}×`, duringRetention >= 0.9],
    ['duplicate storm: exactly one order per key', `${storm.check}, ${problems.length} problems`, problems.length === 0],
  ].map(([target, value, met]) => ({ target, measured: value, verdict: met ? 'met' : 'not met' }))
  const targetNotes = [
    'Commits per new order: `pg_stat_database.xact_commit` of the bench database before and after the measured run of'
    + ` "order, new key · Postgres + Redis" (each read ${statsFlushMs / 1000} s after the load stopped, once Postgres has flushed`
    + ' every backend\'s counts), less the bench\'s own reading, over that run\'s 201 responses. Every commit in the database counts,'
    + ' so the request log\'s batched inserts and the debounced worker wake-up are amortised over the orders: up to 1.05 counts as one.',
    `Postgres round trips per new order: a separate ${roundTripSeconds} s run of the same workload (worker off) after a`
    + ` ${roundTripWarmUpSeconds} s warm-up, the server reaching Postgres through a counting TCP proxy (\`bench/pg-turns-proxy.mjs\`):`
    + ' a round trip begins each time the app sends when Postgres has answered everything it sent before (the proxy reads the protocol:'
    + ' each Sync or simple Query is owed a ReadyForQuery), summed over all connections, over the run\'s 201 responses. Statements pipelined'
    + ' back to back are one round trip however many socket writes carry them, but when Postgres answers one write of a pipeline before'
    + ' the next reached the proxy (postgres.js flushes every 1 KiB, and a write costs this VM ~0.1–0.2 ms) the proxy counts one more than the app waited.'
    + ' Background traffic (request-log batches, notifications, readiness checks) is included on purpose, amortised over the orders.',
  ]
  const costNotes = [
    'Index entries: the entries a new-key run\'s rows added to the database\'s indexes, per order (each table counted in one scan before and'
    + ' after the run, each index\'s rows under its predicate: live entries only, and a new order updates nothing). The writes floor writes'
    + ' the same rows, so its figure is the data model\'s.',
    'Each figure is per successful response of the scenario\'s measured run (an order created, a replay or a delivery answered;'
    + ' in the "paid" rows per order created, its payment\'s confirmation and everything that followed it included;'
    + ' in the "unknown API route" row per 404 problem answered).'
    + ' CPU is utime + stime from /proc/<pid>/stat (10 ms ticks) before and after the measured run — for the rows with the worker on,'
    + ' until the last job the run\'s orders queued has run: "app" is the server processes (the in-app worker included where it runs there),'
    + ' "worker process" a standalone `npm run worker`, "Postgres" every postgres process (backends, WAL writer, checkpointer, autovacuum)'
    + ' but the backends of the bench\'s own connections (its polling for unpaid intents and open jobs),'
    + ' "Redis" every redis-server process, "load generator" the bench\'s own process: autocannon sending the requests and reading'
    + ' the answers (in the paid rows also paying the orders, and in every row with the worker on polling for open jobs). It shares'
    + ' the two cores with the rest: where a row\'s server costs not much more than the load generator, the row measures both.',
    'Write commits: transaction ids Postgres handed out over the same span (`txid_current()` before and after, less the reading\'s own):'
    + ' a transaction that only reads takes none. Cluster-wide, so another database\'s writes at the same time would count.',
    'Rows kept: what the run left in idempotency_records, jobs, request_log and request_log_replays, the tables retention empties, per unit:'
    + ' the rows retention must delete for each order, at the latest after their retention period.',
    `Round trips: a separate ${roundTripSeconds} s run of the same configuration after a ${roundTripWarmUpSeconds} s warm-up,`
    + ' its servers reaching Postgres through the counting proxy (see the targets); with the worker on, its statements until the drain are counted too.',
  ]
  const ratio = (a, b) => `${(rps[a] / rps[b]).toFixed(2)}×`
  const ratios = [
    `new key / the order's own writes on a bare server (what the app adds to the data model's cost): ${ratio('newKey', 'orderWrites')}`,
    `3 tracked SKUs / untracked (new key; the reservation rides in the order's statement): ${ratio('trackedNewKey', 'newKey')}`,
    `replay / new key: Postgres ${ratio('replay', 'newKey')}, embedded ${ratio('replayEmbedded', 'newKeyEmbedded')}`,
    `replay / this build's GET /api/health (the same stack with no work behind the answer): ${ratio('replay', 'liveness')}`,
    `this build's GET /api/health / node:http's (what Nuxt, Nitro, h3 and the request middleware cost an answer): ${ratio('liveness', 'floorLiveness')}`,
    `embedded / Postgres (new key): ${ratio('newKeyEmbedded', 'newKey')}`,
    `request log on / off (new key): ${ratio('newKey', 'newKeyNoLog')}`,
    `transaction mode / session mode, both direct (new key: unnamed statements, SET LOCAL timeouts): ${ratio('newKeyTransactionMode', 'newKey')}`,
    `through PgBouncer (transaction mode) / direct (new key): ${ratio('newKeyPooled', 'newKey')}`,
    `Redis Cluster / one Redis (new key): ${ratio('newKeyCluster', 'newKey')}`,
    `as deployed (${deployedInstances} instances, worker on, info logs) / 1 instance, worker off: new key ${ratio('deployedNewKey', 'newKey')}, replay ${ratio('deployedReplay', 'replay')}`,
    `as deployed, paid / not paid (new key): ${ratio('deployedPaid', 'deployedNewKey')}`,
    `worker in its own process / in the app (as deployed, new key, paid): ${ratio('deployedWorkerProcess', 'deployedPaid')}`,
    `the Stripe stand-in in its own process / mockpay in the app (as deployed, new key, paid): ${ratio('deployedPaidStripe', 'deployedPaid')}`,
    `the worker on one instance / on both (as deployed, Stripe stand-in, new key, paid): ${ratio('deployedPaidStripeOneWorker', 'deployedPaidStripe')}`,
    `webhook new event / order new key: ${ratio('webhookNew', 'newKey')}, webhook redelivery / new event: ${ratio('webhookReplay', 'webhookNew')}`,
    `unknown API route (404 problem) / order replay: ${ratio('unknownRoute', 'replay')}`,
    `storm (${stormInstances} instances) / new key (1 instance): ${ratio('storm', 'newKey')}`,
  ]
  for (const { target, measured: value, verdict } of targets) console.log(`target: ${target}: ${value} — ${verdict}`)
  for (const line of ratios) console.log(line)

  const describeOutcomes = counts => Object.entries(counts).map(([kind, count]) => `${count} × ${kind}`).join(', ')
  const stormLines = [
    `${storm.keys} keys, each sent ${stormCopies} times (${stormCopies / stormInstances} to each instance), ${connections} connections spread over both instances;`
    + ` the instance running behind owed copies of at most ${storm.mostOwed} keys at once`,
    `storm responses: ${describeOutcomes(storm.outcomes.storm)}`,
    `then every key once more with \`Prefer: wait=10\`: ${describeOutcomes(storm.outcomes.settle)}`,
    `SQL: ${storm.check}; ${problems.length === 0
      ? 'every response for a key named the same order, the one the database holds: exactly once'
      : `NOT exactly once: ${problems.length} problems`}`,
  ]
  for (const line of stormLines) console.log(`storm: ${line}`)
  if (problems.length > 0) {
    console.error(`\nThe duplicate storm was not exactly once:\n${problems.slice(0, 20).join('\n')}`)
    process.exitCode = 1
  }
  else {
    const settings = [
      `${connections} connections (autocannon, HTTP/1.1 keep-alive, no pipelining), loopback`,
      `${seconds} s measured per scenario, after a ${warmUpSeconds} s warm-up on the same server process (the storm: on the same two)`,
      `in "order, new key · Postgres + Redis" warm-up and run are ${statsFlushMs / 1000} s apart, so that the commit count starts after every commit of the warm-up was flushed`,
      `duplicate storm: ${stormInstances} instances on one database and one Redis prefix, ${stormCopies} copies per key`,
      'peak RSS: the server process\'s resident high-water mark over its whole life (start-up, warm-up, run);'
      + ' for the storm, the larger of the two instances',
      'the worker is off in the server (`WORKER_ENABLED=false`, `LOG_LEVEL=warn`): jobs only queue up — except in the'
      + ` "as deployed" rows: ${deployedInstances} instances on one database and one Redis, the load spread over both, each running the in-app worker`
      + ' (`WORKER_ENABLED=true`, `LOG_LEVEL=info`, the log written to /dev/null) with mockpay as the payment provider. In the "paid" rows'
      + ' every order is also paid: once the worker has created its intent, the load generator confirms it on mockpay\'s page'
      + ' (`POST /api/mockpay/intents/:id/confirm`) between its orders, and pays what is left unpaid when it stops; so every order runs'
      + ' payment.create_intent, mockpay\'s signed deliveries back to the app (with its duplicate), webhook.apply and the order\'s two effects.'
      + ' Their req/s is orders per second (the confirmations not counted), and their costs are per order, its payment included.'
      + ' Such a run ends when the last of its jobs has run, and starts with no job open. "worker in its own process": the same, but the'
      + ' servers run no worker and one standalone `npm run worker` runs the jobs. "Stripe stand-in as the provider": the same, but the'
      + ' provider is the Stripe stand-in (`npm run stand-in -- stripe`) in its own process, as a deployment\'s provider is another machine:'
      + ' payment.create_intent creates a PaymentIntent there, the bench pays each (`POST /_stand-in/payment_intents/:id/succeed`) as soon as'
      + ' the order has it, and the stand-in sends its signed `payment_intent.succeeded` once, as Stripe normally does, to the first instance'
      + ' (webhook.apply takes a Stripe event as signed, without asking the API again). Its CPU is the "provider" column, not the app\'s.'
      + ` "the worker on one of the ${deployedInstances} instances": the same, but only the first instance (the one the stand-in sends its events to) runs the in-app worker`
      + ' (`WORKER_ENABLED=false` on the other, which serves orders only). The "check" of a paid row is its'
      + ' orders (warm-up\'s included) by status once the run ended: every one paid',
      'the "ceiling" rows answer `GET /api/health` (no body, no credentials, nothing stored or logged): on the one-INSERT floor\'s bare'
      + ' server, what any answer costs this machine and its load generator; on this build, what Nuxt, Nitro, h3 and the app\'s request'
      + ' middleware (request ids, trace context) cost it. A replay can be no faster than the second',
      'before each Postgres scenario the bench database is vacuumed and checkpointed, so that no scenario pays for the previous one\'s rows',
      'topologies: "through PgBouncer" reaches the same database through Debian\'s PgBouncer in transaction mode (default_pool_size 20,'
      + ' ignore_startup_parameters = extra_float_digits) with `DATABASE_POOL_MODE=transaction` and no direct URL; "transaction mode, no pooler"'
      + ' is that mode on a direct connection (what unnamed statements and per-transaction timeouts cost without the pooler\'s hop);'
      + ' "Redis Cluster" uses three masters on loopback (`REDIS_CLUSTER_NODES`, no `REDIS_URL`)',
    ]
    const environment = await describeEnvironment(sql, redisUrl, loadAtStart, speedAtStart)
    const path = writeBenchmarks({ environment, settings, scenarios: rows, costs, costNotes, paidSteps: paidStepRows(paidRoundTrips), targets, targetNotes, ratios, storm: stormLines, retention: retentionLines, profile })
    console.log(`\nwrote ${path}`)
  }
}

const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
const database = `ic_bench_${process.pid}`
await admin.unsafe(`CREATE DATABASE "${database}"`)
const pgliteDir = mkdtempSync(join(tmpdir(), 'ic-bench-'))
const databaseUrl = new URL(adminUrl)
databaseUrl.pathname = `/${database}`
// Named, so that the cost table leaves its backends' CPU out of Postgres' (bench/cost.mjs).
const sql = postgres(databaseUrl.toString(), { max: 2, onnotice: () => {}, connection: { application_name: benchApplicationName } })
// The production topologies of their rows: PgBouncer in transaction mode (its usual settings) in
// front of the bench's Postgres, and a Redis Cluster of three masters.
const pooler = await startPgbouncer({ serverUrl: adminUrl })
const redisCluster = await startRedisCluster()
try {
  const production = { DATABASE_URL: databaseUrl.toString(), REDIS_URL: redisUrl }
  const pooledUrl = new URL(databaseUrl)
  pooledUrl.port = String(pooler.port)
  const embedded = { PGLITE_DIR: pgliteDir }
  // As deployed: two instances, each running the in-app worker for the jobs the orders queue
  // (payment.create_intent, mockpay's deliveries back to the app, webhook.apply, the order's effects),
  // every request logged at info. The log goes nowhere (stdout is discarded anyway), nor does
  // stderr, so the terminal is not flooded. The run ends when the last job has run.
  // The instances (and the worker process) share one Redis prefix, so their locks are one.
  const deployed = { ...production, WORKER_ENABLED: 'true', LOG_LEVEL: 'info', REDIS_KEY_PREFIX: redisPrefix() }
  const asDeployed = { instances: deployedInstances, drain: true, stderr: 'ignore' }
  const scenarios = {
    floor: () => scenario('floor: node:http + one INSERT', production, 'floor', 'new'),
    orderWrites: () => scenario('floor: node:http + a new-key order\'s own writes', production, 'writes', 'new'),
    // What an answer with nothing behind it costs: on a bare server, and through this build's stack.
    floorLiveness: () => scenario('ceiling: node:http, GET /api/health (a constant answer)', production, 'liveness', 'probe', { server: 'floor' }),
    liveness: () => scenario('ceiling: this build, GET /api/health (no work: its request middleware only)', production, 'liveness', 'probe'),
    newKey: () => scenario('order, new key · Postgres + Redis', production, 'order', 'new', { meter: commitsPerOrder() }),
    trackedNewKey: () => scenario('order, new key, 3 tracked SKUs · Postgres + Redis', production, 'trackedOrder', 'new', { meter: commitsPerOrder() }),
    replay: () => scenario('order, replay · Postgres + Redis', production, 'order', 'replay'),
    deployedNewKey: () => scenario(`order, new key · as deployed (${deployedInstances} instances, worker on), not paid`, deployed, 'order', 'new', asDeployed),
    deployedPaid: () => scenario(`order, new key, paid · as deployed (${deployedInstances} instances, worker on)`, deployed, 'order', 'paid', asDeployed),
    deployedPaidStripe: () => scenario(`order, new key, paid · as deployed, Stripe stand-in as the provider (its own process)`, deployed, 'order', 'paid', { ...asDeployed, provider: 'stripe' }),
    deployedPaidStripeOneWorker: () => scenario(`order, new key, paid · as deployed, Stripe stand-in as the provider, the worker on one of the ${deployedInstances} instances`, deployed, 'order', 'paid', { ...asDeployed, provider: 'stripe', workerInstances: 1 }),
    deployedReplay: () => scenario(`order, replay · as deployed (${deployedInstances} instances, worker on)`, deployed, 'order', 'replay', asDeployed),
    deployedWorkerProcess: () => scenario(`order, new key, paid · as deployed, worker in its own process`, { ...deployed, WORKER_ENABLED: 'false' }, 'order', 'paid', { ...asDeployed, workerProcess: true }),
    storm: () => stormScenario(`order storm · ${stormInstances} instances, ${stormCopies} copies per key`, production, sql),
    newKeyTransactionMode: () => scenario('order, new key · transaction mode, no pooler', { ...production, DATABASE_POOL_MODE: 'transaction' }, 'order', 'new'),
    newKeyPooled: () => scenario('order, new key · through PgBouncer (transaction mode)', { ...production, DATABASE_URL: pooledUrl.toString(), DATABASE_POOL_MODE: 'transaction' }, 'order', 'new'),
    newKeyCluster: () => scenario('order, new key · Redis Cluster', { DATABASE_URL: production.DATABASE_URL, REDIS_CLUSTER_NODES: redisCluster.nodesSetting }, 'order', 'new'),
    newKeyNoLog: () => scenario('order, new key · request log off', { ...production, REQUEST_LOG_ENABLED: 'false' }, 'order', 'new'),
    webhookNew: () => scenario('webhook, new event · Postgres + Redis', production, 'webhook', 'new'),
    webhookReplay: () => scenario('webhook, redelivery · Postgres + Redis', production, 'webhook', 'replay'),
    unknownRoute: () => scenario('unknown API route (404 problem) · Postgres + Redis', production, 'unknownRoute', 'refused'),
    newKeyEmbedded: () => scenario('order, new key · embedded PGlite', embedded, 'order', 'new'),
    replayEmbedded: () => scenario('order, replay · embedded PGlite', embedded, 'order', 'replay'),
    // Last: retention leaves the tables bigger than the others found them (dead rows, the part its budget did not reach).
    newKeyBacklog: () => backlogScenario(`order, new key · ${retentionRowsPerTable.toLocaleString('en-US')} expired rows per table, retention idle`, production, { retention: false }),
    newKeyRetention: () => backlogScenario(`order, new key · while retention deletes ${retentionRowsPerTable.toLocaleString('en-US')} expired rows per table`, production, { retention: true }),
  }
  const unknown = only?.filter(name => !(name in scenarios) && !profiles.includes(name))
  if (unknown?.length) throw new Error(`BENCH_ONLY names no scenario: ${unknown.join(', ')} (there are: ${Object.keys(scenarios).join(', ')})`)
  const measured = {}
  // The floor always runs: every ratio is to it.
  for (const [name, measure] of Object.entries(scenarios)) {
    if (!only || name === 'floor' || only.includes(name)) measured[name] = await measure()
  }
  if (only) {
    printRates(measured)
    console.table(Object.values(measured).filter(({ cost }) => cost).map(row => costRow(row)))
    for (const { label, count } of Object.values(measured)) if (count) console.log(`${label}: ${count.perOrder.toFixed(2)} commits per order (${count.count} / ${count.orders})`)
    const retention = measured.newKeyRetention?.retention
    if (retention) console.log(`retention: deleted ${retention.deleted.toLocaleString('en-US')} of ${retention.seeded.toLocaleString('en-US')} rows in ${(retention.ms / 1000).toFixed(1)} s: ${Math.round(retention.rowsPerSecond).toLocaleString('en-US')} rows/s`)
    // profile: the paid order as deployed (profileStripe: the Stripe stand-in its provider); profileNewKey and profileReplay: the order on one instance, worker off.
    const profiled = { profile: () => profileScenario(deployed, asDeployed), profileStripe: () => profileScenario(deployed, { ...asDeployed, provider: 'stripe' }), profileNewKey: () => profileScenario(production, {}, 'new'), profileReplay: () => profileScenario(production, {}, 'replay') }
    if (only.includes('paidRoundTrips')) {
      const paid = await roundTripScenario(deployed, 'paid', asDeployed, 'order', { byStatement: true })
      console.log(`paid order as deployed: ${paid.perOrder.toFixed(2)} round trips per order`)
      console.table(paidStepRows(paid))
    }
    for (const name of profiles.filter(name => name in profiled && only.includes(name))) {
      const profile = profileRows(await profiled[name]())
      console.table(profile.groups)
      console.table(profile.functions)
      console.table(profile.nativeCalls)
    }
  }
  else {
    await report(measured, { production, deployed, asDeployed })
  }
}
finally {
  await deleteRedisKeys(redisRunPrefix)
  await sql.end()
  await pooler.destroy()
  await redisCluster.stop()
  await admin.unsafe(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
  await admin.end()
  rmSync(pgliteDir, { recursive: true, force: true })
}
