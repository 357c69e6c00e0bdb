import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { AnswerLog } from '../support/chaos/answers'
import { type Balancer, startBalancer } from '../support/chaos/balancer'
import { runFaultSchedule } from '../support/chaos/faults'
import { type Fleet, startFleet } from '../support/chaos/fleet'
import { checkInvariants, invariantNames, type InvariantResult } from '../support/chaos/invariants'
import { loadClientHeader, readMockpayEvents, runLoad } from '../support/chaos/load'
import { startPostgresServer, type TestPostgresServer } from '../support/chaos/postgres-server'
import { printEvidence, printFigures, printInvariants, printRefundRows, printStockRows } from '../support/chaos/report'
import { createTenant } from '../support/http'
import { type Pgbouncer, startPgbouncer } from '../support/pgbouncer.mjs'
import { startRedisServer, type TestRedisServer } from '../support/redis-server'
import { uniqueRedisPrefix } from '../support/services'

// "Never twice, never lost" under faults: three built app instances and two standalone workers on
// a Postgres and a Redis this file owns, behind a round-robin balancer, under a fixed-length load
// of retrying clients that order (reserving tracked stock, some of it scarce), pay, refund (some
// refunds restocking) and cancel, while instances and a worker are SIGKILLed, Redis is flushed and
// lost, and Postgres crashes. Once everything has settled the rows are checked against what the
// clients were told, what mockpay recorded and the stock ledger (and the counts read during the
// run); each invariant is one test below. The run is made twice: the instances and workers
// reaching Postgres directly, then through PgBouncer in transaction mode (no direct URL), which is
// also SIGKILLed for 5 s.

const durationMs = Number(process.env.CHAOS_SECONDS ?? 90) * 1000
const virtualClients = 12
const appCount = 3
const workerCount = 2
/** Outlives any outage of the run (5 s) many times over: a request unanswered this long is lost. */
const requestDeadlineMs = 60_000
const settleTimeoutMs = 90_000

/** Every process of the run: short leases, heartbeats and lock TTLs, so that what a SIGKILL leaves behind is taken over within the run. */
const timingEnv = {
  ...fastJobsEnv,
  // Up to 3 s between attempts: eight attempts span about 9 s and outlast a 5 s outage, so an outage alone dead-letters nothing.
  JOB_BACKOFF_CAP_MS: '3000',
  JOB_HEARTBEAT_TIMEOUT_MS: '5000',
  JOB_LOCK_TTL_MS: '5000',
  IDEMPOTENCY_LOCK_TTL_MS: '5000',
  // Refunds and cancels run leased: a claim whose instance was killed is taken over after this, not after the default 30 s.
  IDEMPOTENCY_LEASE_MS: '5000',
  MOCKPAY_ENABLED: 'true',
}

const topologies = [
  { name: 'chaos: never twice, never lost', pooled: false },
  { name: 'chaos through PgBouncer (transaction mode): never twice, never lost', pooled: true },
]

for (const topology of topologies) describe(topology.name, () => {
  let postgresServer: TestPostgresServer | undefined
  let pooler: Pgbouncer | undefined
  let redisServer: TestRedisServer | undefined
  let balancer: Balancer | undefined
  let fleet: Fleet | undefined
  let sql: postgres.Sql | undefined
  let results: InvariantResult[] = []

  beforeAll(async () => {
    let origin = Date.now()
    const clock = () => Date.now() - origin
    const note = (line: string) => console.log(`[chaos +${(clock() / 1000).toFixed(1)} s] ${line}`)

    postgresServer = await startPostgresServer('chaos')
    if (topology.pooled) pooler = await startPgbouncer({ serverUrl: postgresServer.url })
    redisServer = await startRedisServer()
    const answers = new AnswerLog(clock)
    // The load generator records its own answers; the webhooks that reach the balancer otherwise are the workers' mockpay deliveries.
    balancer = await startBalancer({
      targets: () => fleet?.liveAppUrls() ?? [],
      onAnswer: (answer) => {
        if (answer.requestHeaders[loadClientHeader] || !answer.path.startsWith('/api/webhooks/')) return
        answers.record('mockpay delivery (worker)', 'balancer', answer.balancerReason ? 'balancer 502' : answer.status, answer.retryAfter)
      },
    })
    const poolEnv: Record<string, string> = pooler ? { DATABASE_POOL_MODE: 'transaction' } : {}
    const env = { ...timingEnv, ...poolEnv, MOCKPAY_WEBHOOK_URL: `${balancer.url}/api/webhooks/mockpay`, MOCKPAY_WEBHOOK_SECRET: testSecrets.mockpayWebhookSecret }
    fleet = await startFleet({
      databaseUrl: pooler ? pooler.urlFor(postgresServer.url) : postgresServer.url,
      redisUrl: redisServer.url,
      redisKeyPrefix: uniqueRedisPrefix('chaos'),
      appCount,
      workerCount,
      appEnv: { ...env, FAULTS_ENABLED: 'true', WORKER_ENABLED: 'false' },
      // Standalone workers deliver mockpay's webhooks, signed with mockpay's secret (in `env`) that the instances verify with.
      workerEnv: { ...env, JOB_MAINTENANCE_INTERVAL_MS: '1000' },
      clock,
    })
    sql = postgres(postgresServer.url, { max: 2, onnotice: () => {} })
    const tenant = await createTenant(balancer.url, 'chaos')
    note(`setup done: ${appCount} app instances, ${workerCount} workers, Postgres on ${postgresServer.port}${pooler ? ` through PgBouncer on ${pooler.port}` : ''}, Redis on ${redisServer.port}, balancer ${balancer.url}`)

    origin = Date.now()
    const [load, faults] = await Promise.all([
      runLoad({
        balancerUrl: balancer.url,
        liveAppUrls: fleet.liveAppUrls,
        appCount,
        secretKey: tenant.secretKey,
        clients: virtualClients,
        durationMs,
        requestDeadlineMs,
        // The worker waits out the outages and backs off; behind PgBouncer a Postgres restart heals only at its next login retry.
        workDeadlineMs: settleTimeoutMs,
        maxCrashFaults: 4,
        answers,
        clock,
        note,
      }),
      runFaultSchedule({ durationMs, fleet, redis: redisServer, postgres: postgresServer, pooler, clock, note }),
    ])
    note(`load finished: ${load.figures.intents} intents`)

    await fleet.allUp(60_000)
    const settled = await waitUntilSettled(sql, settleTimeoutMs)
    note(settled ? 'settled: no job pending or running, every event processed' : `not settled after ${settleTimeoutMs / 1000} s`)
    await readMockpayEvents(balancer.url, tenant.secretKey, load)

    results = await checkInvariants({ sql, tenantId: tenant.tenantId, load, answers, baseUrl: balancer.url, fleetEvents: fleet.events })
    printFigures({ durationMs, load, answers, faults, fleetEvents: fleet.events })
    await printRefundRows(sql, tenant.tenantId)
    await printStockRows(sql, tenant.tenantId)
    printInvariants(results)
    if (results.some(result => result.violations.length)) await printEvidence(balancer.url, results)
  })

  afterAll(async () => {
    await fleet?.stop()
    // Processes of a fleet that failed to start all of its members.
    await stopAll()
    await balancer?.close()
    await sql?.end()
    await redisServer?.stop()
    await pooler?.destroy()
    await postgresServer?.destroy()
  })

  for (const name of invariantNames) {
    it(name, () => {
      const result = results.find(candidate => candidate.invariant === name)
      expect(result, 'the chaos run ended before its invariants were checked').toBeDefined()
      // On one line, so that the end of a CI log (the first line of each failure) names what broke.
      expect(result!.violations, result!.violations.join(' | ').replaceAll('\n', ' ')).toEqual([])
      // A check that looked at nothing proves nothing (no 5xx at all would mean the outages were missed).
      expect(result!.checked).toBeGreaterThan(0)
    })
  }
})

/** Until no job is queued, running or waiting for a retry and no stored event is unprocessed; false at the timeout. */
async function waitUntilSettled(sql: postgres.Sql, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const [row] = await sql<[{ pending: number, received: number }]>`
      select (select count(*)::int from jobs where status in ('queued', 'running', 'failed')) as pending,
             (select count(*)::int from webhook_events where status = 'received') as received`
    if (row.pending === 0 && row.received === 0) return true
    await sleep(500)
  }
  return false
}
