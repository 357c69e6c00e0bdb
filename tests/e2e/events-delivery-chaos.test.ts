import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll } from '../support/app'
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy'
import { createTenant, request } from '../support/http'
import { postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { freePort } from '../support/ports.mjs'
import { type ManagedProcess, projectRoot, spawnManaged } from '../support/processes'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// Events out, exactly once in effect (docs/events.md#delivery, docs/receiving-events.md): two app
// instances deliver a tenant's events to the receiver of docs/receiving-events.md (the fixture app
// tests/fixtures/event-receiver, on nuxt-idempotency) through a proxy that answers 500, holds answers
// past the sender's timeout and drops them after the receiver applied the event; meanwhile the
// receiver and both instances (with their workers) are killed and restarted. Every event must reach
// the receiver under its own id and be applied exactly once.

const ORDERS = 1000
const CANCELS = 100
const receiverDir = resolve(projectRoot, 'tests/fixtures/event-receiver')

describeWithServices('events delivered through crashes and a flaky receiver', ['postgres', 'redis'], () => {
  const buildDir = `/tmp/event-receiver-${randomUUID()}`
  /** The receiver's keys in the shared Redis, the same across its restarts (the prefix is part of every scope). */
  const receiverKeyPrefix = `receiver:${randomUUID()}:`
  let appDatabase: Awaited<ReturnType<typeof createTestDatabase>>
  let receiverDatabase: Awaited<ReturnType<typeof createTestDatabase>>
  let sql: postgres.Sql
  let instances: AppProcess[] = []
  let proxy: FaultProxy
  let receiver: ManagedProcess | undefined
  let receiverPort: number
  let tenant: TenantCredentials
  let secret: string

  const appEnv = {
    ...fastJobsEnv,
    JOB_HEARTBEAT_TIMEOUT_MS: '2000',
    JOB_LOCK_TTL_MS: '2000',
    WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: 'true',
    // Long enough to outlast every outage below (about 70 s in all), short enough for a test.
    WEBHOOK_RETRY_SCHEDULE: '1s,1s,2s,2s,3s,3s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s',
    WEBHOOK_DELIVERY_TIMEOUT_MS: '1500',
    MOCKPAY_DUPLICATES: '0',
    MOCKPAY_MAX_DELAY_MS: '0',
  }
  const startInstance = (n: number) => startApp({ databaseUrl: appDatabase.url, redisUrl, label: `events-chaos-${n}`, env: { ...appEnv, REDIS_KEY_PREFIX: 'events-chaos:', WORKER_ID: `instance-${n}` } })

  async function startReceiver(): Promise<ManagedProcess> {
    const started = spawnManaged({
      label: 'event-receiver',
      args: [`${buildDir}/.output/server/index.mjs`],
      env: {
        ...process.env, NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(receiverPort),
        DATABASE_URL: receiverDatabase.url, REDIS_URL: redisUrl, NUXT_IDEMPOTENCY_KEY_PREFIX: receiverKeyPrefix, NUXT_CHECKOUT_WEBHOOK_SECRET: secret,
      },
    })
    await pollUntil('the receiver answers', async () => {
      if (started.hasExited()) throw new Error(`the receiver exited:\n${started.output()}`)
      return fetch(`http://127.0.0.1:${receiverPort}/api/applied`).then(response => response.ok, () => false)
    }, { timeoutMs: 30_000, intervalMs: 100 })
    return started
  }

  beforeAll(async () => {
    const build = spawn('npx', ['nuxt', 'build'], { cwd: receiverDir, env: { ...process.env, RECEIVER_BUILD_DIR: buildDir, NODE_ENV: 'production' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let buildOutput = ''
    build.stdout.on('data', (chunk) => { buildOutput += chunk })
    build.stderr.on('data', (chunk) => { buildOutput += chunk })
    ;[appDatabase, receiverDatabase] = await Promise.all([createTestDatabase('events-chaos'), createTestDatabase('events-receiver')])
    sql = postgres(appDatabase.url, { max: 2, onnotice: () => {} })
    instances = [await startInstance(0)]
    instances.push(await startInstance(1))
    receiverPort = await freePort()
    proxy = await startFaultProxy({ target: `http://127.0.0.1:${receiverPort}` })
    tenant = await createTenant(instances[0]!.url, 'events chaos')
    const endpoint = await request(instances[0]!.url, '/api/webhook-endpoints', {
      method: 'POST',
      headers: { 'authorization': `Bearer ${tenant.secretKey}`, 'idempotency-key': randomUUID() },
      body: { url: `${proxy.url}/api/checkout-events`, events: ['*'] },
    })
    expect(endpoint.status, endpoint.text).toBe(201)
    secret = endpoint.json.secret
    const built = await new Promise<number | null>(done => build.once('close', done))
    if (built !== 0) throw new Error(`the receiver's build failed:\n${buildOutput}`)
    receiver = await startReceiver()
  }, 300_000)

  afterAll(async () => {
    await receiver?.stop()
    await proxy?.close()
    await sql?.end()
    await stopAll()
    await appDatabase?.drop()
    await receiverDatabase?.drop()
  }, 60_000)

  it(`${ORDERS + CANCELS} events reach the receiver through 500s, lost answers and crashes: none lost, none applied twice, one webhook-id each`, async () => {
    // A flaky receiver from the start: 500s, answers held past the sender's timeout, answers dropped after it applied.
    const delivery = (path: string) => path.startsWith('/api/checkout-events')
    proxy.script.push(
      { match: r => delivery(r.path), action: { kind: 'status', status: 500, body: { error: 'flaky' } }, times: 40, label: '500' },
      { match: r => delivery(r.path), action: { kind: 'hold-answer', ms: 2500 }, times: 15, label: 'answer after the timeout' },
      { match: r => delivery(r.path), action: { kind: 'drop-answer' }, times: 15, label: 'answer lost' },
    )

    // The orders, on both instances at once: 16 clients.
    const placed: string[] = []
    let next = 0
    await Promise.all(Array.from({ length: 16 }, async (_, client) => {
      while (next < ORDERS) {
        next++
        const created = await postOrder(instances[client % 2]!.url, { secretKey: tenant.secretKey, key: randomUUID(), body: validOrderBody({ cartId: `cart-${randomUUID()}` }) })
        expect(created.status, created.text).toBe(201)
        placed.push(created.json.id)
      }
    }))
    for (const orderId of placed.slice(0, CANCELS)) {
      const canceled = await request(instances[1]!.url, `/api/orders/${orderId}/cancel`, { method: 'POST', headers: { 'authorization': `Bearer ${tenant.secretKey}`, 'idempotency-key': randomUUID() } })
      expect(canceled.status, canceled.text).toBe(200)
    }

    // Crashes while deliveries run: the receiver mid-request, then each instance with its worker.
    await pollUntil('deliveries under way', async () => (await appliedCount()) > 50, { timeoutMs: 60_000, intervalMs: 50 })
    receiver!.kill('SIGKILL')
    await receiver!.exited
    await sleep(2000)
    receiver = await startReceiver()
    for (const n of [0, 1]) {
      await sleep(1000)
      instances[n]!.kill('SIGKILL')
      await instances[n]!.exited
      await sleep(1000)
      instances[n] = await startInstance(n)
    }

    const expected = await sql<Array<{ id: string }>>`select id from events where tenant_id = ${tenant.tenantId}`
    expect(expected).toHaveLength(ORDERS + CANCELS)
    let applied = new Map<string, number>()
    await pollUntil(`every event applied (${applied.size} of ${expected.length} so far)`, async () => {
      applied = await appliedEvents()
      return applied.size >= expected.length
    }, { timeoutMs: 240_000, intervalMs: 500 })

    // None lost, none unknown, none applied twice.
    expect([...applied.keys()].sort()).toEqual(expected.map(row => row.id).sort())
    expect([...applied].filter(([, times]) => times !== 1)).toEqual([])

    // Every delivery carried its event's id as webhook-id; the faults made some events arrive more than once.
    const deliveries = proxy.exchanges.filter(exchange => delivery(exchange.request.path))
    for (const { request: sent } of deliveries) expect(sent.headers['webhook-id']).toBe(JSON.parse(sent.body).id)
    const copies = new Map<string, number>()
    for (const { request: sent } of deliveries) copies.set(String(sent.headers['webhook-id']), (copies.get(String(sent.headers['webhook-id'])) ?? 0) + 1)
    expect([...copies.values()].filter(count => count > 1).length).toBeGreaterThanOrEqual(30)

    // The outbox agrees: every delivery job completed, none dead, and failed attempts were recorded.
    // An event the receiver applied while its answer was lost leaves its job failed until the next
    // attempt (seconds later, by the retry schedule) is answered: wait for the jobs to settle.
    const deliveryJobs = () => sql<Array<{ status: string, n: number }>>`select status, count(*)::int as n from jobs where kind = 'webhook.deliver' group by status order by status`
    let jobs = await deliveryJobs()
    await pollUntil(`every delivery job settled (${JSON.stringify(jobs)} so far)`, async () => {
      jobs = await deliveryJobs()
      return jobs.every(row => row.status !== 'queued' && row.status !== 'failed' && row.status !== 'running')
    }, { timeoutMs: 60_000, intervalMs: 250 })
    expect(jobs).toEqual([{ status: 'completed', n: ORDERS + CANCELS }])
    const [attempts] = await sql<Array<{ failed: number, delivered: number }>>`
      select count(*) filter (where not delivered)::int as failed, count(*) filter (where delivered)::int as delivered from webhook_attempts`
    expect(attempts!.failed).toBeGreaterThanOrEqual(40)
    expect(attempts!.delivered).toBeGreaterThanOrEqual(ORDERS + CANCELS)
    console.info(`[events chaos] ${expected.length} events, ${deliveries.length} deliveries seen by the proxy, ${attempts!.failed} failed attempts recorded, ${[...copies.values()].filter(count => count > 1).length} events delivered more than once, each applied once`)
  }, 420_000)

  async function appliedEvents(): Promise<Map<string, number>> {
    const response = await fetch(`http://127.0.0.1:${receiverPort}/api/applied`).catch(() => undefined)
    if (!response?.ok) return new Map()
    const rows = await response.json() as Array<{ event_id: string, times: number }>
    return new Map(rows.map(row => [row.event_id, row.times]))
  }

  async function appliedCount(): Promise<number> {
    return [...(await appliedEvents()).values()].length
  }
})
