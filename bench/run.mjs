// Throughput of the idempotency layer against the built server on loopback (`npm run bench`).
// Needs the build (`npm run build`) and a Postgres to create a scratch database in
// (BENCH_POSTGRES_URL, default the local server) and Redis (BENCH_REDIS_URL); the embedded rows use
// PGlite in a temporary folder.
// Prints a table and ratios. Bounded: each scenario runs BENCH_SECONDS (default 8) seconds.
import { spawn } from 'node:child_process'
import { createHmac, randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import postgres from 'postgres'

const adminUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const seconds = Number(process.env.BENCH_SECONDS ?? 8)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16)
const serverEntry = `${process.env.APP_BUILD_ROOT ?? '.'}/.output/server/index.mjs`
const opsToken = `ops_bench_${randomUUID()}`

if (!existsSync(serverEntry)) {
  console.error(`No build at ${serverEntry}: run \`npm run build\` first.`)
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

async function startServer(env, entry = serverEntry) {
  const port = await freePort()
  const child = spawn(process.execPath, [entry], {
    env: {
      ...process.env, PORT: String(port), HOST: '127.0.0.1', NODE_ENV: 'production', LOG_LEVEL: 'warn', OPS_TOKEN: opsToken,
      WEBHOOK_STANDARD_SECRET: webhookSecret, WEBHOOK_STRIPE_SECRET: randomUUID(),
      MIDTRANS_SERVER_KEY: randomUUID(), WORKER_ENABLED: 'false', REDIS_KEY_PREFIX: `bench:${randomUUID()}:`, ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 300; i++) {
    const ready = await fetch(`${url}/api/ready`).then(r => r.ok, () => false)
    if (ready) return { url, stop: () => new Promise(resolve => { child.once('exit', resolve); child.kill('SIGTERM') }) }
    await sleep(100)
  }
  child.kill('SIGKILL')
  throw new Error('server did not become ready')
}

const orderBody = cartId => JSON.stringify({
  cartId, currency: 'IDR', amount: 150000, paymentMethod: 'bank_transfer',
  items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 75000 }], customer: { email: 'bench@example.com' },
})

const webhookSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`

/** A signed Standard Webhooks delivery, as a provider sends it (fresh timestamp per attempt). */
const eventBody = webhookId => JSON.stringify({ type: 'payment.succeeded', timestamp: new Date().toISOString(), data: { orderId: `ord_${webhookId}`, paymentId: `pi_${webhookId}`, amount: 150000, currency: 'IDR' } })

function signedWebhook(webhookId, body = eventBody(webhookId)) {
  const timestamp = Math.floor(Date.now() / 1000)
  const signature = createHmac('sha256', Buffer.from(webhookSecret.slice(6), 'base64')).update(`${webhookId}.${timestamp}.${body}`).digest('base64')
  return { headers: { 'content-type': 'application/json', 'webhook-id': webhookId, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` }, body }
}

/** What each request of a workload sends: new key or the same key, order or webhook. */
function workload(kind, mode, secretKey) {
  if (kind === 'webhook') {
    // A redelivery keeps its body (and so its fingerprint); only the signature's timestamp moves.
    const redelivered = `msg_bench_${randomUUID()}`
    const body = eventBody(redelivered)
    return { path: '/api/webhooks/standard', next: () => (mode === 'replay' ? signedWebhook(redelivered, body) : signedWebhook(`msg_${randomUUID()}`)) }
  }
  const headers = { 'content-type': 'application/json', 'authorization': `Bearer ${secretKey}` }
  const replayKey = `bench-replay-${randomUUID()}`
  return {
    path: '/api/orders',
    next: () => {
      const key = mode === 'replay' ? replayKey : randomUUID()
      return { headers: { ...headers, 'idempotency-key': key }, body: orderBody(key) }
    },
  }
}

async function run(url, requests) {
  const first = requests.next()
  // A replay scenario replays what its first request stored.
  await fetch(`${url}${requests.path}`, { method: 'POST', headers: first.headers, body: first.body })
  const result = await autocannon({
    url: `${url}${requests.path}`, method: 'POST', connections, duration: seconds,
    requests: [{ setupRequest: request => ({ ...request, ...requests.next() }) }],
  })
  const statuses = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, count]))
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx, statuses }
}

async function scenario(label, env, kind, mode) {
  const floor = kind === 'floor'
  const server = await startServer(env, floor ? floorEntry : serverEntry)
  try {
    // The floor has no tenants: it takes the same order requests and ignores the credentials.
    const tenant = floor
      ? { secretKey: 'none' }
      : await fetch(`${server.url}/api/ops/tenants`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'authorization': `Bearer ${opsToken}` }, body: '{"name":"bench"}',
      }).then(r => r.json())
    await run(server.url, workload(kind, mode, tenant.secretKey)) // warm-up: JIT, pools, caches
    const measured = await run(server.url, workload(kind, mode, tenant.secretKey))
    return { scenario: label, 'req/s': Math.round(measured.rps), 'p50 ms': measured.p50, 'p99 ms': measured.p99, 'non-2xx+errors': measured.errors, statuses: JSON.stringify(measured.statuses) }
  }
  finally {
    await server.stop()
  }
}

const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
const database = `ic_bench_${process.pid}`
await admin.unsafe(`CREATE DATABASE "${database}"`)
const pgliteDir = mkdtempSync(join(tmpdir(), 'ic-bench-'))
const databaseUrl = new URL(adminUrl)
databaseUrl.pathname = `/${database}`
try {
  const production = { DATABASE_URL: databaseUrl.toString(), REDIS_URL: redisUrl }
  const embedded = { PGLITE_DIR: pgliteDir }
  const rows = [
    await scenario('floor: node:http + one INSERT', production, 'floor', 'new'),
    await scenario('order, new key · Postgres + Redis', production, 'order', 'new'),
    await scenario('order, replay · Postgres + Redis', production, 'order', 'replay'),
    await scenario('order, new key · request log off', { ...production, REQUEST_LOG_ENABLED: 'false' }, 'order', 'new'),
    await scenario('webhook, new event · Postgres + Redis', production, 'webhook', 'new'),
    await scenario('webhook, redelivery · Postgres + Redis', production, 'webhook', 'replay'),
    await scenario('order, new key · embedded PGlite', embedded, 'order', 'new'),
    await scenario('order, replay · embedded PGlite', embedded, 'order', 'replay'),
  ]
  console.log(`\n${connections} connections, ${seconds} s per scenario, loopback`)
  console.table(rows)
  const [floor, newKey, replay, newKeyNoLog, webhookNew, webhookReplay, newKeyEmbedded, replayEmbedded] = rows.map(r => r['req/s'])
  console.log(`ratio to the floor: new key ${(newKey / floor).toFixed(2)}×, replay ${(replay / floor).toFixed(2)}×, webhook ingest ${(webhookNew / floor).toFixed(2)}×`)
  console.log(`replay / new key: Postgres ${(replay / newKey).toFixed(2)}×, embedded ${(replayEmbedded / newKeyEmbedded).toFixed(2)}×`
    + `   embedded / Postgres (new key): ${(newKeyEmbedded / newKey).toFixed(2)}×`
    + `   request log on / off (new key): ${(newKey / newKeyNoLog).toFixed(2)}×`
    + `   webhook new event / order new key: ${(webhookNew / newKey).toFixed(2)}×, webhook redelivery / new event: ${(webhookReplay / webhookNew).toFixed(2)}×`)
}
finally {
  await admin.unsafe(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
  await admin.end()
  rmSync(pgliteDir, { recursive: true, force: true })
}
