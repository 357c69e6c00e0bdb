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
import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import postgres from 'postgres'
import { startPgbouncer } from '../tests/support/pgbouncer.mjs'
import { startRedisCluster } from '../tests/support/redis-topology-servers.mjs'
import { samplePeakRss } from './memory.mjs'
import { startTurnsProxy } from './pg-turns-proxy.mjs'
import { describeEnvironment, writeBenchmarks } from './report.mjs'
import { mockpaySecret, webhookSecret, workload } from './requests.mjs'
import { runStorm } from './storm.mjs'

const adminUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const seconds = Number(process.env.BENCH_SECONDS ?? 8)
const warmUpSeconds = Number(process.env.BENCH_WARMUP_SECONDS ?? Math.min(seconds, 3))
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16)
const stormCopies = Number(process.env.BENCH_STORM_COPIES ?? 4)
const stormInstances = 2
// Counting round trips needs no long run, only enough orders to amortise the background traffic.
const roundTripSeconds = 3
const roundTripWarmUpSeconds = 1
const serverEntry = `${process.env.APP_BUILD_ROOT ?? '.'}/.output/server/index.mjs`
const opsToken = `ops_bench_${randomUUID()}`
const [loadAtStart] = loadavg()

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

/**
 * A server process; `stop()` ends it and resolves to its peak RSS in MiB. Its stdout (the log) is
 * discarded; its stderr, where start-up failures go, is shown unless `stderr` is 'ignore'.
 */
async function startServer(env, entry, stderr) {
  const port = await freePort()
  const child = spawn(process.execPath, [entry], {
    env: {
      ...process.env, PORT: String(port), HOST: '127.0.0.1', NODE_ENV: 'production', LOG_LEVEL: 'warn', OPS_TOKEN: opsToken,
      WEBHOOK_STANDARD_SECRET: webhookSecret, WEBHOOK_STRIPE_SECRET: randomUUID(),
      MIDTRANS_SERVER_KEY: randomUUID(), WORKER_ENABLED: 'false', REDIS_KEY_PREFIX: `bench:${randomUUID()}:`,
      // A payment provider, as a deployment has: each order gets its payment.create_intent job.
      PAYMENT_PROVIDER: 'mockpay', MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: mockpaySecret, ...env,
    },
    stdio: ['ignore', 'ignore', stderr],
  })
  const memory = samplePeakRss(child.pid)
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 300; i++) {
    const ready = await fetch(`${url}/api/ready`).then(r => r.ok, () => false)
    if (ready) {
      return {
        url,
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

async function run(url, requests, duration) {
  // A replay scenario replays what its first request stored. A new-key one sends nothing but what
  // autocannon counts, so that every order created while it runs is one of its 201 responses.
  if (requests.replay) {
    const first = requests.next()
    await fetch(`${url}${requests.path}`, { method: 'POST', headers: first.headers, body: first.body })
  }
  return autocannon({
    url: `${url}${requests.path}`, method: 'POST', connections, duration,
    requests: [{ setupRequest: request => ({ ...request, ...requests.next() }) }],
  })
}

/** Starts `count` servers with one environment; if one fails to start, stops the others. */
async function startServers(count, env, entry, stderr = 'inherit') {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startServer(env, entry, stderr)))
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
    async stop(result) {
      await sleep(settleMs)
      const count = await read() - before - ownCost
      const orders = result.statusCodeStats['201']?.count ?? 0
      return { count, orders, perOrder: count / orders }
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

/** `meter` counts something over the measured run; `stderr: 'ignore'` silences the server. */
async function scenario(label, env, kind, mode, { meter, duration = seconds, warmUp = warmUpSeconds, stderr } = {}) {
  const floor = kind === 'floor'
  await settlePostgres()
  const [server] = await startServers(1, env, floor ? floorEntry : serverEntry, stderr)
  return measureOn([server], async () => {
    // The floor has no tenants: it takes the same order requests and ignores the credentials.
    const tenant = floor ? { secretKey: 'none' } : await createTenant(server.url)
    await run(server.url, workload(kind, mode, tenant.secretKey), warmUp) // warm-up: JIT, pools, caches
    await meter?.start()
    const result = await run(server.url, workload(kind, mode, tenant.secretKey), duration)
    return { label, result, count: await meter?.stop(result) }
  })
}

/**
 * Postgres round trips per new order: the new-key workload on a server that reaches Postgres through
 * the counting proxy. Not a throughput row: the proxy adds a hop to every round trip. Whatever else
 * the server sends meanwhile (request-log batches, notifications, readiness checks) is counted too,
 * and so amortised over the orders.
 */
async function roundTripScenario(env) {
  const target = new URL(env.DATABASE_URL)
  const proxy = await startTurnsProxy({ host: target.hostname, port: Number(target.port || 5432) })
  const proxied = new URL(target)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(proxy.port)
  try {
    // A second of quiet around each reading: the request log's last batch of the run is in.
    const { count } = await scenario('order, new key · through the round-trip counter', { ...env, DATABASE_URL: proxied.toString() }, 'order', 'new', {
      meter: perOrder(proxy.turns, 1000), duration: roundTripSeconds, warmUp: roundTripWarmUpSeconds,
    })
    return count
  }
  finally {
    await proxy.close()
  }
}

/** Two instances sharing the database and the Redis prefix; a warm-up storm, then the measured one. */
async function stormScenario(label, env, sql) {
  await settlePostgres()
  const servers = await startServers(stormInstances, { ...env, REDIS_KEY_PREFIX: `bench:${randomUUID()}:` }, serverEntry)
  return measureOn(servers, async () => {
    const storm = async duration => runStorm({
      urls: servers.map(server => server.url), tenant: await createTenant(servers[0].url), sql, connections, seconds: duration, copies: stormCopies,
    })
    const warmUp = await storm(warmUpSeconds)
    const measured = await storm(seconds)
    const problems = [...warmUp.problems.map(problem => `warm-up: ${problem}`), ...measured.problems]
    return { label, result: measured.result, check: measured.check, storm: measured, problems }
  })
}

const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
const database = `ic_bench_${process.pid}`
await admin.unsafe(`CREATE DATABASE "${database}"`)
const pgliteDir = mkdtempSync(join(tmpdir(), 'ic-bench-'))
const databaseUrl = new URL(adminUrl)
databaseUrl.pathname = `/${database}`
const sql = postgres(databaseUrl.toString(), { max: 2, onnotice: () => {} })
// The production topologies of their rows: PgBouncer in transaction mode (its usual settings) in
// front of the bench's Postgres, and a Redis Cluster of three masters.
const pooler = await startPgbouncer({ serverUrl: adminUrl })
const redisCluster = await startRedisCluster()
try {
  const production = { DATABASE_URL: databaseUrl.toString(), REDIS_URL: redisUrl }
  const pooledUrl = new URL(databaseUrl)
  pooledUrl.port = String(pooler.port)
  const embedded = { PGLITE_DIR: pgliteDir }
  // As deployed: the in-app worker runs the jobs the orders queue, and every request logs at info.
  // The log goes nowhere (stdout is discarded anyway), nor does stderr, so the terminal is not flooded.
  const deployed = { ...production, WORKER_ENABLED: 'true', LOG_LEVEL: 'info' }
  const measured = {
    floor: await scenario('floor: node:http + one INSERT', production, 'floor', 'new'),
    newKey: await scenario('order, new key · Postgres + Redis', production, 'order', 'new', { meter: commitsPerOrder() }),
    newKeyWorker: await scenario('order, new key · worker on (as deployed)', deployed, 'order', 'new', { stderr: 'ignore' }),
    replay: await scenario('order, replay · Postgres + Redis', production, 'order', 'replay'),
    storm: await stormScenario(`order storm · ${stormInstances} instances, ${stormCopies} copies per key`, production, sql),
    newKeyTransactionMode: await scenario('order, new key · transaction mode, no pooler', { ...production, DATABASE_POOL_MODE: 'transaction' }, 'order', 'new'),
    newKeyPooled: await scenario('order, new key · through PgBouncer (transaction mode)', { ...production, DATABASE_URL: pooledUrl.toString(), DATABASE_POOL_MODE: 'transaction' }, 'order', 'new'),
    newKeyCluster: await scenario('order, new key · Redis Cluster', { DATABASE_URL: production.DATABASE_URL, REDIS_CLUSTER_NODES: redisCluster.nodesSetting }, 'order', 'new'),
    newKeyNoLog: await scenario('order, new key · request log off', { ...production, REQUEST_LOG_ENABLED: 'false' }, 'order', 'new'),
    webhookNew: await scenario('webhook, new event · Postgres + Redis', production, 'webhook', 'new'),
    webhookReplay: await scenario('webhook, redelivery · Postgres + Redis', production, 'webhook', 'replay'),
    newKeyEmbedded: await scenario('order, new key · embedded PGlite', embedded, 'order', 'new'),
    replayEmbedded: await scenario('order, replay · embedded PGlite', embedded, 'order', 'replay'),
  }
  const commits = measured.newKey.count
  const roundTrips = await roundTripScenario(production)
  const rps = Object.fromEntries(Object.entries(measured).map(([name, { result }]) => [name, result.requests.average]))
  const rows = Object.values(measured).map(({ label, result, peakRssMiB, check }) => ({
    'scenario': label,
    'req/s': Math.round(result.requests.average),
    'p50 ms': result.latency.p50,
    'p99 ms': result.latency.p99,
    'peak RSS MiB': peakRssMiB,
    '× floor': (result.requests.average / rps.floor).toFixed(2),
    'responses': Object.entries(result.statusCodeStats).map(([code, { count }]) => `${code}: ${count}`).join(', '),
    'errors': result.errors + result.timeouts,
    'check': check ?? '',
  }))
  console.log(`\n${connections} connections, ${seconds} s per scenario after a ${warmUpSeconds} s warm-up, loopback`)
  console.table(rows)

  const { storm, problems } = measured.storm
  const toFloor = name => rps[name] / rps.floor
  const perNewOrder = ({ count, orders, perOrder }, what) => `${perOrder.toFixed(2)} (${count} ${what} / ${orders} orders)`
  const targets = [
    ['new-key order ≥ 0.5× floor (goal 0.9×)', `${toFloor('newKey').toFixed(2)}×`, toFloor('newKey') >= 0.5],
    ['webhook new event ≥ 0.5× floor', `${toFloor('webhookNew').toFixed(2)}×`, toFloor('webhookNew') >= 0.5],
    ['new-key order through PgBouncer (transaction mode) ≥ 0.7× direct', `${(rps.newKeyPooled / rps.newKey).toFixed(2)}×`, rps.newKeyPooled / rps.newKey >= 0.7],
    ['replays ≥ 2× floor (goal 3×)', `${toFloor('replay').toFixed(2)}×`, toFloor('replay') >= 2],
    ['commits per new order = 1', perNewOrder(commits, 'commits'), commits.perOrder <= 1.05],
    ['Postgres round trips per new order ≤ 2', perNewOrder(roundTrips, 'round trips'), roundTrips.perOrder <= 2],
    ['duplicate storm: exactly one order per key', `${storm.check}, ${problems.length} problems`, problems.length === 0],
  ].map(([target, value, met]) => ({ target, measured: value, verdict: met ? 'met' : 'not met' }))
  const targetNotes = [
    'Commits per new order: `pg_stat_database.xact_commit` of the bench database before and after the measured run of'
    + ` "order, new key · Postgres + Redis" (each read ${statsFlushMs / 1000} s after the load stopped, once Postgres has flushed`
    + ' every backend\'s counts), less the bench\'s own reading, over that run\'s 201 responses. Every commit in the database counts,'
    + ' so the request log\'s batched inserts and the debounced worker wake-up are amortised over the orders: up to 1.05 counts as one.',
    `Postgres round trips per new order: a separate ${roundTripSeconds} s run of the same workload (worker off) after a`
    + ` ${roundTripWarmUpSeconds} s warm-up, the server reaching Postgres through a counting TCP proxy (\`bench/pg-turns-proxy.mjs\`):`
    + ' a round trip begins each time the app sends after Postgres last did, summed over all connections, over the run\'s 201 responses.'
    + ' Background traffic (request-log batches, notifications, readiness checks) is included on purpose, amortised over the orders.',
  ]
  const ratio = (a, b) => `${(rps[a] / rps[b]).toFixed(2)}×`
  const ratios = [
    `replay / new key: Postgres ${ratio('replay', 'newKey')}, embedded ${ratio('replayEmbedded', 'newKeyEmbedded')}`,
    `embedded / Postgres (new key): ${ratio('newKeyEmbedded', 'newKey')}`,
    `request log on / off (new key): ${ratio('newKey', 'newKeyNoLog')}`,
    `transaction mode / session mode, both direct (new key: unnamed statements, SET LOCAL timeouts): ${ratio('newKeyTransactionMode', 'newKey')}`,
    `through PgBouncer (transaction mode) / direct (new key): ${ratio('newKeyPooled', 'newKey')}`,
    `Redis Cluster / one Redis (new key): ${ratio('newKeyCluster', 'newKey')}`,
    `worker on / off (new key): ${ratio('newKeyWorker', 'newKey')}`,
    `webhook new event / order new key: ${ratio('webhookNew', 'newKey')}, webhook redelivery / new event: ${ratio('webhookReplay', 'webhookNew')}`,
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
      'the worker is off in the server (`WORKER_ENABLED=false`, `LOG_LEVEL=warn`): jobs only queue up — except in'
      + ' "order, new key · worker on (as deployed)", where the in-app worker runs them (`WORKER_ENABLED=true`, `LOG_LEVEL=info`, the log discarded)',
      'before each Postgres scenario the bench database is vacuumed and checkpointed, so that no scenario pays for the previous one\'s rows',
      'topologies: "through PgBouncer" reaches the same database through Debian\'s PgBouncer in transaction mode (default_pool_size 20,'
      + ' ignore_startup_parameters = extra_float_digits) with `DATABASE_POOL_MODE=transaction` and no direct URL; "transaction mode, no pooler"'
      + ' is that mode on a direct connection (what unnamed statements and per-transaction timeouts cost without the pooler\'s hop);'
      + ' "Redis Cluster" uses three masters on loopback (`REDIS_CLUSTER_NODES`, no `REDIS_URL`)',
    ]
    const environment = await describeEnvironment(sql, redisUrl, loadAtStart)
    const path = writeBenchmarks({ environment, settings, scenarios: rows, targets, targetNotes, ratios, storm: stormLines })
    console.log(`\nwrote ${path}`)
  }
}
finally {
  await sql.end()
  await pooler.destroy()
  await redisCluster.stop()
  await admin.unsafe(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
  await admin.end()
  rmSync(pgliteDir, { recursive: true, force: true })
}
