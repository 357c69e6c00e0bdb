import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import { and, eq, type SQL, sql } from 'drizzle-orm'
import { Redis, type RedisOptions } from 'ioredis'
import { createStorage, type Storage } from 'unstorage'
import redisDriver from 'unstorage/drivers/redis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Database, type DatabaseHandle, openDatabase } from '@idempotent-checkout/db-kit'
import { violatedUniqueConstraint, defineStatement } from '@idempotent-checkout/db-kit'
import { stock, tenants } from '../../server/db/schema'
import { idempotencyRecords, runIdempotent, createIdempotencyStore, createReplayCache, createMemoryLocks, createRedisLocks } from 'nuxt-idempotency/core'
import type { RecordView } from '../../packages/nuxt-idempotency/src/runtime/core/store'
import { processingLockKey } from '../../packages/nuxt-idempotency/src/runtime/core/run'
import { CACHE_EXPIRY_MARGIN_MS } from '../../packages/nuxt-idempotency/src/runtime/core/replay-cache'
import type { RedisClient } from '../../server/redis'
import type { Locks, AtomicOperation, AtomicPlan, IdempotencyDeps, IdempotentOutcome, IdempotentRequest, IdempotentResult, LeasedOperation, TransactionalOperation, IdempotencyStore } from 'nuxt-idempotency/core'
import { problem } from '../../server/problems'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { startTcpProxy } from '../support/tcp-proxy'
import { pollUntil } from '../support/poll'
import { startRedisServer } from '../support/redis-server'
import { connectSharedTestRedis, type TestRedisConnection } from '../support/redis-topologies'
import { describeWithServices, freePort, postgresAdminUrl, uniqueRedisPrefix } from '../support/services'
import { testMigrations } from '../support/migrations'

// The transport-free idempotency core (server/idempotency/core.ts) on every pair of backends the app
// runs on, with real parts only: Postgres or PGlite, Redis or in-process locks, and the Redis replay
// tier. The business writes are tenant rows named after the test's scope, so every test can count
// exactly how many executions committed.

const ROUTE = 'POST /api/tenants'
const OTHER_ROUTE = 'POST /api/other'
const TTL_SECONDS = 3_600
/** A TTL inside the caches' expiry margin: no cache keeps the response, so a test may expire the record itself. */
const UNCACHED_TTL_SECONDS = CACHE_EXPIRY_MARGIN_MS / 1000
/** Generous: only the tests about expiry and timeouts shorten these. */
const LOCK_TTL_MS = 10_000
const LEASE_MS = 10_000
const SHORT_LOCK_TTL_MS = 150
const PAST_SHORT_LOCK_TTL_MS = 500
const SHORT_LEASE_MS = 300
/** lock_timeout of the pool in the lock_timeout tests: how long a statement waits on another's uncommitted record. */
const SHORT_LOCK_TIMEOUT_MS = 300
/** Prefer: wait of the duplicates that should end with the first response. */
const WAIT_MS = 20_000
/** A duplicate that may wait must still be waiting this long after it started while the owner holds on. */
const STILL_WAITING_MS = 300
const CONCURRENT_REQUESTS = 8
const REPLAY_CACHE_BYTES = 1_000_000
/** Every instance of a deployment signs its shared replay entries with one key. */
const REPLAY_SIGNING_KEY = 'replay-cache-contract-signing-key-0123456789'
const signed = (storage: Storage | undefined) => storage && { storage, signingKey: REPLAY_SIGNING_KEY }

/** The plans' business statement: one tenant row. */
const insertTenant = defineStatement<{ id: string, name: string }>(db => db.insert(tenants).values({
  id: sql.placeholder('id'),
  name: sql.placeholder('name'),
}))

const newTenantId = () => `ten_${randomUUID()}`

/** A stock row below zero: the statement fails on the check stock_counts_non_negative. */
const insertNegativeStock = defineStatement<{ tenantId: string }>(db => db.insert(stock).values({ tenantId: sql.placeholder('tenantId'), sku: 'SKU-1', onHand: -1 }))

const created = (tenantId: string): IdempotentResult => ({
  status: 201,
  // Deliberately unsorted keys: a replay must be the stored body byte for byte.
  body: { object: 'tenant', id: tenantId, name: 'core contract' },
  headers: { Location: `/api/tenants/${tenantId}` },
  resourceType: 'tenant',
  resourceId: tenantId,
})

/** The response the core stores for a result: the body says which key it answers. */
const stored = (result: IdempotentResult, key = 'key-1') => ({ ...result, body: { ...result.body, idempotency: { key, replayed: false } } })

/** The outcome of an execution that committed `tenantId`'s row. */
const executedAs = (tenantId: string, notes: { degraded?: boolean, takeover?: boolean } = {}, key = 'key-1') =>
  ({ kind: 'executed', response: stored(created(tenantId), key), ...notes })

/** The business row an execution committed. */
function committed(outcome: IdempotentOutcome | undefined): string {
  if (outcome?.kind !== 'executed') throw new Error(`expected an execution, got ${JSON.stringify(outcome)}`)
  return outcome.response.resourceId!
}

/** What a replay of `executed` answers. */
function replayOf(executed: IdempotentOutcome) {
  if (executed.kind !== 'executed') throw new Error(`expected an execution, got ${JSON.stringify(executed)}`)
  return { status: executed.response.status, body: executed.response.body, headers: executed.response.headers ?? {} }
}

function expectReplay(outcome: IdempotentOutcome, executed: IdempotentOutcome, notes: { degraded?: boolean } = {}) {
  expect(outcome).toEqual({ kind: 'replayed', response: replayOf(executed), ...notes })
  // Byte for byte, key order included, whichever tier answered.
  if (outcome.kind === 'replayed' && executed.kind === 'executed') expect(JSON.stringify(outcome.response.body)).toBe(JSON.stringify(executed.response.body))
}

/** A 4xx problem as the core stores it for `key`. */
function storedProblem(tenantId: string, key: string) {
  return {
    status: 409,
    body: {
      type: '/problems/cart-already-ordered', title: 'Cart already ordered', status: 409, detail: `Tenant ${tenantId} exists`, tenantId,
      idempotency: { key, replayed: false },
    },
    headers: { 'Content-Type': 'application/problem+json' },
    error: 'cart-already-ordered',
  }
}
const tenantExists = (tenantId: string) => problem('cart-already-ordered', `Tenant ${tenantId} exists`, { extensions: { tenantId } })

/** Fails fast like the app's clients, towards a server that is not (or no longer) there. */
const failFast: RedisOptions = { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 300, commandTimeout: 300 }

/** A shared replay tier on Redis through unstorage, as the handler mounts it; its connection errors stay quiet. */
function redisReplayTier(url: string, base: string, options: RedisOptions = {}): Storage {
  const driver = redisDriver({ ...options, url, base })
  ;(driver.getInstance?.() as Redis | undefined)?.on('error', () => {})
  return createStorage({ driver })
}

interface Pair {
  driver: DatabaseDriver
  locks: 'redis' | 'memory'
}

/**
 * The behaviour of the core on one pair of database and locks. Two instances are two deps objects
 * (two processes): one database, their own replay caches, and their own locks — on Redis under one
 * key prefix, in-process one lock table each. PGlite has a single connection: tests that need two
 * transactions open at once, or a read while a transaction is open, run on Postgres only.
 */
function idempotencyCoreContract(pair: Pair) {
  const redisPair = pair.locks === 'redis'
  const concurrentTransactions = pair.driver === 'postgres'

  let database: SuiteDatabase
  let db: Database
  let store: IdempotencyStore
  let scope: string
  let instanceCount = 0
  let requestCount = 0
  /**
   * Redis pair: the two processes' connections and replay tiers, under one key prefix, on the shared
   * test Redis (a Cluster or behind Sentinel when the run names one), made by the app's own factory.
   */
  const redisConnections: TestRedisConnection[] = []
  let redisClients: RedisClient[] = []
  let sharedTiers: Storage[] = []
  /** Redis pair: locks and a replay tier on a port where nothing listens. */
  let unreachable: { client: Redis, locks: Locks, shared: Storage }
  /** Steps a test holds, and pools it opened: released and closed after each test, even a failed one. */
  const holds: Array<() => void> = []
  const cleanUps: Array<() => Promise<void>> = []

  beforeAll(async () => {
    // One connection per concurrent request, so the races happen in Postgres, not in the pool queue.
    database = await openSuiteDatabase(pair.driver, `idempotency_core_${pair.locks}`, { poolSize: CONCURRENT_REQUESTS * 2 + 4 })
    db = database.handle.db
    store = createIdempotencyStore(db)
    if (!redisPair) return
    const prefix = uniqueRedisPrefix('idempotency core')
    while (redisConnections.length < 2) redisConnections.push(await connectSharedTestRedis('idempotency core', { prefix }))
    redisClients = redisConnections.map(connection => connection.client)
    // Each process's replay tier rides on its connection (keys under `<prefix>replay:`), as the app mounts it.
    sharedTiers = redisConnections.map(connection => createStorage({ driver: connection.storageDriver }))
    const port = await freePort()
    const client = new Redis({ ...failFast, host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null })
    client.on('error', () => {})
    const shared = redisReplayTier(`redis://127.0.0.1:${port}`, 'replay', { ...failFast, lazyConnect: true, retryStrategy: () => null })
    unreachable = { client, locks: createRedisLocks(client), shared }
  }, 60_000)

  afterAll(async () => {
    unreachable?.client.disconnect()
    await unreachable?.shared.dispose()
    for (const tier of sharedTiers) await tier.dispose()
    for (const connection of redisConnections.splice(0)) await connection.close()
    await database?.close()
  })

  beforeEach(() => {
    // A fresh scope per test: its records, lock keys and tenant rows meet no other test's.
    scope = `tenant:core_${randomUUID()}`
    instanceCount = 0
  })

  afterEach(async () => {
    for (const release of holds.splice(0)) release()
    for (const cleanUp of cleanUps.splice(0).reverse()) await cleanUp()
  })

  interface InstanceOptions {
    /** Another instance's locks: the same process (in-process locks are one table per process). */
    locks?: Locks
    /** The shared replay tier; null for none. By default the pair's: Redis, or none. */
    shared?: Storage | null
    database?: DatabaseHandle
    lockTtlMs?: number
    leaseMs?: number
  }

  /** One app instance: a fresh replay cache, and a process of its own unless given another's locks. */
  function instance(options: InstanceOptions = {}): IdempotencyDeps {
    const slot = instanceCount++ % 2
    return {
      database: options.database ?? database.handle,
      locks: options.locks ?? (redisPair ? createRedisLocks(redisClients[slot]!) : createMemoryLocks()),
      replays: createReplayCache({ maxBytes: REPLAY_CACHE_BYTES, shared: signed(options.shared === null ? undefined : options.shared ?? sharedTiers[slot]) }),
      lockTtlMs: options.lockTtlMs ?? LOCK_TTL_MS,
      leaseMs: options.leaseMs ?? LEASE_MS,
    }
  }

  /** An instance that sees `owner`'s processing lock: any on Redis; in-process, one in the owner's process. */
  const peerOf = (owner: IdempotencyDeps) => instance({ locks: redisPair ? undefined : owner.locks })

  /** An instance whose Redis (locks and shared tier) cannot be reached. */
  const withoutRedis = (options: InstanceOptions = {}) => instance({ ...options, locks: unreachable.locks, shared: unreachable.shared })

  function request(overrides: Partial<IdempotentRequest> = {}): IdempotentRequest {
    return {
      scope,
      route: ROUTE,
      key: 'key-1',
      fingerprint: 'fp-a',
      requestId: `req_${++requestCount}`,
      ttlSeconds: TTL_SECONDS,
      waitMs: 0,
      annotateBody: true,
      ...overrides,
    }
  }

  interface TenantWrite {
    /** The tenant every execution writes (the same row each time); by default a fresh one per execution, as an order gets a fresh id. */
    tenantId?: string
  }

  /** An atomic operation writing one tenant row; `planned` lists the rows its executions planned. */
  function atomic(options: TenantWrite & { onConstraintViolation?: AtomicPlan['onConstraintViolation'], beforeCommit?: () => Promise<void> } = {}) {
    const planned: string[] = []
    const operation: AtomicOperation = {
      mode: 'atomic',
      plan: (planDb) => {
        const tenantId = options.tenantId ?? newTenantId()
        planned.push(tenantId)
        return { statements: [insertTenant(planDb, { id: tenantId, name: scope })], result: created(tenantId), onConstraintViolation: options.onConstraintViolation }
      },
      beforeCommit: options.beforeCommit,
    }
    return Object.assign(operation, { planned })
  }

  /** A claimed atomic operation writing one tenant row after `first` (inside its transaction); `fail` is thrown after the write. */
  function leased(options: TenantWrite & { first?: () => Promise<void> | void, fail?: unknown } = {}): TransactionalOperation {
    return {
      mode: 'atomic',
      execute: async (tx) => {
        await options.first?.()
        const tenantId = options.tenantId ?? newTenantId()
        await tx.insert(tenants).values({ id: tenantId, name: scope })
        if (options.fail) throw options.fail
        return created(tenantId)
      },
    }
  }

  /** A step that stops until the test releases it, and tells when it was reached. */
  function hold() {
    let markReached!: () => void
    let release!: () => void
    const reached = new Promise<void>((resolve) => { markReached = resolve })
    const released = new Promise<void>((resolve) => { release = resolve })
    holds.push(release)
    const step = async () => {
      markReached()
      await released
    }
    return { reached, release, step }
  }

  /** A promise and whether it settled yet. */
  function watch<T>(promise: Promise<T>) {
    const watched = { promise, settled: false }
    const settle = () => { watched.settled = true }
    promise.then(settle, settle)
    return watched
  }

  async function query<T>(statement: SQL): Promise<T[]> {
    const result = await db.execute(statement) as unknown
    return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[]
  }

  /** The business rows this test's executions committed. */
  async function businessRows(): Promise<string[]> {
    const rows = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.name, scope))
    return rows.map(row => row.id).sort()
  }

  async function recordCount(): Promise<number> {
    return (await db.select({ id: idempotencyRecords.id }).from(idempotencyRecords).where(eq(idempotencyRecords.scope, scope))).length
  }

  async function record(key = 'key-1'): Promise<RecordView> {
    const found = await store.find(scope, key)
    expect(found).toBeDefined()
    return found!
  }

  /** The record and the tenant row were written by one transaction (the same xmin). */
  async function expectOneTransaction(tenantId: string, key = 'key-1') {
    const [recordRow] = await query<{ xmin: string }>(sql`select xmin::text as xmin from idempotency_records where scope = ${scope} and key = ${key}`)
    const [tenantRow] = await query<{ xmin: string }>(sql`select xmin::text as xmin from tenants where id = ${tenantId}`)
    expect(recordRow?.xmin).toBeDefined()
    expect(recordRow?.xmin).toBe(tenantRow?.xmin)
  }

  /** Postgres: how many statements on this database wait on another transaction's lock. */
  async function lockWaiters(): Promise<number> {
    const [row] = await query<{ waiting: number }>(sql`select count(*)::int as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)
    return Number(row?.waiting ?? 0)
  }

  const someoneWaitsOnALock = (what: string) => pollUntil(what, async () => await lockWaiters() >= 1)

  /** Redis pair: the owner's release (sent off its response path) has landed, so another instance finds the key free. */
  async function lockReleased(key = 'key-1') {
    if (redisPair) await pollUntil('the processing lock is released', async () => await redisClients[1]!.exists(processingLockKey(scope, key)) === 0)
  }

  async function expire(key = 'key-1') {
    await db.update(idempotencyRecords).set({ expiresAt: sql`now() - interval '1 second'` })
      .where(and(eq(idempotencyRecords.scope, scope), eq(idempotencyRecords.key, key)))
  }

  /** A leased claim, as a leased owner left it (its lease runs out after `leaseMs`). */
  async function leasedClaim(options: { key?: string, fingerprint?: string, leaseMs: number }) {
    const claim = await store.insert({
      scope, key: options.key ?? 'key-1', route: ROUTE, fingerprint: options.fingerprint ?? 'fp-a', requestId: 'req_leased_owner',
      leaseMs: options.leaseMs, ttlSeconds: TTL_SECONDS,
    })
    expect(claim).toBeDefined()
    return claim!
  }

  const leaseRanOut = (key = 'key-1') => pollUntil(`the lease of ${key} ran out`, async () => !(await record(key)).leaseLive)

  /** Postgres: another pool on this suite's database (another process's), its own lock_timeout, maybe through a proxy. */
  async function anotherPool(options: { proxyPort?: number, lockTimeoutMs?: number } = {}): Promise<DatabaseHandle> {
    const [row] = await query<{ name: string }>(sql`select current_database() as name`)
    const url = new URL(postgresAdminUrl)
    if (options.proxyPort) url.port = String(options.proxyPort)
    url.pathname = `/${row!.name}`
    const handle = await openDatabase({ url: url.toString(), pgliteDir: '', migrations: testMigrations, poolSize: 4, lockTimeoutMs: options.lockTimeoutMs })
    cleanUps.push(() => handle.close())
    return handle
  }

  // -------------------------------------------------------------------------------------------
  // 1. The first execution and its replays: one commit holds the record and the business row.
  // -------------------------------------------------------------------------------------------
  describe('first execution and replays', () => {
    it('executes once: the record is stored finished, with its response, in the business row\'s transaction', async () => {
      const operation = atomic()
      const outcome = await runIdempotent(instance(), request(), operation)
      expect(operation.planned).toHaveLength(1)
      const [tenantId] = operation.planned as [string]
      expect(outcome).toEqual(executedAs(tenantId))
      expect(await businessRows()).toEqual([tenantId])
      expect(await recordCount()).toBe(1)
      const found = await record()
      expect(found).toMatchObject({
        route: ROUTE,
        fingerprint: 'fp-a',
        status: 'succeeded',
        responseStatus: 201,
        responseBody: stored(created(tenantId)).body,
        responseHeaders: { Location: `/api/tenants/${tenantId}` },
        resourceType: 'tenant',
        resourceId: tenantId,
        error: null,
        leaseToken: null,
        leaseExpiresAt: null,
        attempts: 1,
        expired: false,
      })
      expect(JSON.stringify(found.responseBody)).toBe(JSON.stringify(stored(created(tenantId)).body))
      await expectOneTransaction(tenantId)
    })

    it('replays the stored response on the same instance and on another one, and executes nothing more', async () => {
      const owner = instance()
      const executed = await runIdempotent(owner, request(), atomic())
      expectReplay(await runIdempotent(owner, request(), atomic()), executed)
      // A fresh local cache: the shared tier (Redis) or Postgres answers.
      expectReplay(await runIdempotent(instance(), request(), atomic()), executed)
      expect(await businessRows()).toEqual([committed(executed)])
      expect(await recordCount()).toBe(1)
      expect(await record()).toMatchObject({ status: 'succeeded', resourceId: committed(executed), attempts: 1 })
    })

    it('refuses another request under the key, naming the first route, on any instance', async () => {
      const owner = instance()
      const executed = await runIdempotent(owner, request(), atomic())
      const other = request({ fingerprint: 'fp-b', route: OTHER_ROUTE })
      expect(await runIdempotent(owner, other, atomic())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
      await lockReleased()
      expect(await runIdempotent(instance(), other, atomic())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
      expect(await businessRows()).toEqual([committed(executed)])
      expect(await record()).toMatchObject({ fingerprint: 'fp-a', route: ROUTE, resourceId: committed(executed) })
    })

    // A process that learns of the first execution from Postgres alone (its own in-process locks, no
    // shared tier): the record's insert must fail on the key before any business write can.
    it('a second execution that reaches Postgres replays the record, even when its business writes collide with the first\'s', async () => {
      const tenantId = newTenantId()
      const executed = await runIdempotent(instance(), request(), atomic({ tenantId }))
      const consulted: string[] = []
      const sameRows = atomic({ tenantId, onConstraintViolation: async (constraint) => {
        consulted.push(constraint)
        return undefined
      } })
      const outcome = await runIdempotent(instance({ locks: createMemoryLocks(), shared: null }), request(), sameRows)
        .catch((error: unknown) => ({ rejectedWith: String(error), constraint: violatedUniqueConstraint(error) }))
      expectReplay(outcome as IdempotentOutcome, executed)
      expect(consulted).toEqual([])
      expect(await businessRows()).toEqual([tenantId])
      expect(await recordCount()).toBe(1)
    })

    if (redisPair) {
      it('shares the response through the Redis tier: another instance replays it from there, with its locks unreachable', async () => {
        const executed = await runIdempotent(instance(), request(), atomic())
        const probe = createReplayCache({ maxBytes: REPLAY_CACHE_BYTES, shared: signed(sharedTiers[1]) })
        await pollUntil('the shared tier holds the response', async () => (await probe.shared(scope, 'key-1', 'fp-a')) !== undefined)
        // Had the shared tier not answered, the unreachable lock would have made it degraded.
        expectReplay(await runIdempotent(instance({ locks: unreachable.locks }), request(), atomic()), executed)
        expect(await businessRows()).toEqual([committed(executed)])
      })
    }
  })

  // -------------------------------------------------------------------------------------------
  // 2. Duplicates of a request still in flight: the owner holds its lock and its open transaction.
  // -------------------------------------------------------------------------------------------
  describe('a duplicate while the first is in flight', () => {
    async function startHeldOwner() {
      const owner = instance()
      const first = hold()
      const running = runIdempotent(owner, request(), atomic({ beforeCommit: first.step }))
      await first.reached
      return { owner, first, running }
    }

    // PGlite: the duplicate's record read would wait for the owner's transaction to end.
    if (concurrentTransactions) {
      it('the same request is answered in progress at once; nothing is visible until the owner commits', async () => {
        const { owner, first, running } = await startHeldOwner()
        expect(await runIdempotent(peerOf(owner), request(), atomic())).toEqual({ kind: 'in_progress', reason: 'running' })
        expect(await store.find(scope, 'key-1')).toBeUndefined()
        expect(await businessRows()).toEqual([])
        first.release()
        const executed = await running
        expect(executed).toEqual(executedAs(committed(executed)))
        expect(await businessRows()).toEqual([committed(executed)])
        expect(await recordCount()).toBe(1)
      })
    }

    // The tag alone is not the answer: the holder may be a late duplicate of a finished request, so
    // the record is read first. PGlite's one connection serves that read after the owner's commit.
    it('another request under the key is refused, from the lock\'s tag, at once where the record can be read meanwhile', async () => {
      const { owner, first, running } = await startHeldOwner()
      const refused = watch(runIdempotent(peerOf(owner), request({ fingerprint: 'fp-b' }), atomic()))
      if (concurrentTransactions) expect(await refused.promise).toEqual({ kind: 'conflict' })
      first.release()
      expect((await refused.promise).kind).toBe('conflict')
      const executed = await running
      expect(executed.kind).toBe('executed')
      expect(await businessRows()).toEqual([committed(executed)])
      expect(await record()).toMatchObject({ fingerprint: 'fp-a' })
    })

    it('a duplicate that may wait waits for the owner, then replays its response', async () => {
      const { owner, first, running } = await startHeldOwner()
      const waiting = watch(runIdempotent(peerOf(owner), request({ waitMs: WAIT_MS }), atomic()))
      await delay(STILL_WAITING_MS)
      expect(waiting.settled).toBe(false)
      first.release()
      const executed = await running
      expect(executed.kind).toBe('executed')
      expectReplay(await waiting.promise, executed)
      expect(await businessRows()).toEqual([committed(executed)])
      expect(await recordCount()).toBe(1)
    })
  })

  // -------------------------------------------------------------------------------------------
  // 3. The plan's own constraints: a deterministic answer is stored for the key, anything else fails.
  // -------------------------------------------------------------------------------------------
  describe('unique and check violations of the plan', () => {
    it('a 4xx problem thrown by onConstraintViolation is stored as the key\'s failure and replayed; the business row stays the first', async () => {
      const owner = instance()
      const tenantId = committed(await runIdempotent(owner, request(), atomic()))
      const seen: string[] = []
      // Another request (key) that would write the same tenant row.
      const sameTenant = atomic({
        tenantId,
        onConstraintViolation: async (constraint) => {
          seen.push(constraint)
          if (constraint === 'tenants_pkey') throw tenantExists(tenantId)
          return undefined
        },
      })
      const secondKey = request({ key: 'key-2', fingerprint: 'fp-b' })
      const failure = storedProblem(tenantId, 'key-2')
      const outcome = await runIdempotent(owner, secondKey, sameTenant)
      expect(outcome).toEqual({ kind: 'executed', response: failure })
      expect(seen).toEqual(['tenants_pkey'])
      expect(await record('key-2')).toMatchObject({
        status: 'failed',
        responseStatus: 409,
        responseBody: failure.body,
        responseHeaders: failure.headers,
        resourceType: null,
        resourceId: null,
        error: 'cart-already-ordered',
        leaseToken: null,
        attempts: 1,
      })
      expectReplay(await runIdempotent(owner, secondKey, sameTenant), outcome)
      await lockReleased('key-2')
      expectReplay(await runIdempotent(instance(), secondKey, sameTenant), outcome)
      expect(await businessRows()).toEqual([tenantId])
      expect(await recordCount()).toBe(2)
    })

    it('a check violation reaches onConstraintViolation too: its 4xx is stored and replayed, and nothing of the plan is written', async () => {
      const owner = instance()
      const seen: string[] = []
      const tenantId = newTenantId()
      const overdrawn: AtomicOperation = {
        mode: 'atomic',
        plan: planDb => ({
          statements: [insertTenant(planDb, { id: tenantId, name: scope }), insertNegativeStock(planDb, { tenantId })],
          result: created(tenantId),
          onConstraintViolation: async (constraint) => {
            seen.push(constraint)
            throw tenantExists(tenantId)
          },
        }),
      }
      const outcome = await runIdempotent(owner, request(), overdrawn)
      expect(outcome).toEqual({ kind: 'executed', response: storedProblem(tenantId, 'key-1') })
      expect(seen).toEqual(['stock_counts_non_negative'])
      expectReplay(await runIdempotent(owner, request(), overdrawn), outcome)
      expect(seen).toHaveLength(1)
      expect(await businessRows()).toEqual([])
      expect(await recordCount()).toBe(1)
    })

    it('an answer onConstraintViolation reads after the rollback is stored as the key\'s response', async () => {
      const owner = instance()
      const tenantId = committed(await runIdempotent(owner, request(), atomic()))
      const existing = atomic({
        tenantId,
        onConstraintViolation: async (constraint, readDb) => {
          const [row] = await readDb.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId))
          return constraint === 'tenants_pkey' && row ? { status: 200, body: { object: 'tenant', id: row.id, existing: true } } : undefined
        },
      })
      const secondKey = request({ key: 'key-2', fingerprint: 'fp-b' })
      const outcome = await runIdempotent(owner, secondKey, existing)
      const body = { object: 'tenant', id: tenantId, existing: true, idempotency: { key: 'key-2', replayed: false } }
      expect(outcome).toEqual({ kind: 'executed', response: { status: 200, body } })
      expect(await record('key-2')).toMatchObject({ status: 'succeeded', responseStatus: 200, responseBody: body, responseHeaders: {}, error: null, leaseToken: null, attempts: 1 })
      expectReplay(await runIdempotent(instance(), secondKey, existing), outcome)
      expect(await businessRows()).toEqual([tenantId])
    })

    it('a constraint the plan does not know fails the request and stores nothing; the key stays free', async () => {
      const owner = instance()
      const tenantId = committed(await runIdempotent(owner, request(), atomic()))
      const failureOf = (outcome: Promise<unknown>) => outcome.then(() => 'resolved', (error: unknown) => error)

      const unknownToThePlan = await failureOf(runIdempotent(owner, request({ key: 'key-2', fingerprint: 'fp-b' }), atomic({ tenantId, onConstraintViolation: async () => undefined })))
      expect(violatedUniqueConstraint(unknownToThePlan)).toBe('tenants_pkey')
      const withoutHandler = await failureOf(runIdempotent(owner, request({ key: 'key-3', fingerprint: 'fp-c' }), atomic({ tenantId })))
      expect(violatedUniqueConstraint(withoutHandler)).toBe('tenants_pkey')

      expect(await store.find(scope, 'key-2')).toBeUndefined()
      expect(await store.find(scope, 'key-3')).toBeUndefined()
      expect(await businessRows()).toEqual([tenantId])
      const retried = await runIdempotent(owner, request({ key: 'key-2', fingerprint: 'fp-d' }), atomic())
      expect(retried).toEqual(executedAs(committed(retried), {}, 'key-2'))
      expect(await businessRows()).toEqual([tenantId, committed(retried)].sort())
    })
  })

  // -------------------------------------------------------------------------------------------
  // 4. An unexpected failure rolls everything back: the record and the business writes alike.
  // -------------------------------------------------------------------------------------------
  describe('an unexpected failure', () => {
    it('rejects and leaves neither record nor business row; the retry executes once', async () => {
      const owner = instance()
      const failure = new Error('fail-before-commit')
      const faulted = atomic({ beforeCommit: async () => { throw failure } })
      await expect(runIdempotent(owner, request(), faulted)).rejects.toBe(failure)
      expect(faulted.planned).toHaveLength(1)
      expect(await store.find(scope, 'key-1')).toBeUndefined()
      expect(await businessRows()).toEqual([])

      const retried = await runIdempotent(owner, request(), atomic())
      expect(retried).toEqual(executedAs(committed(retried)))
      expect(await businessRows()).toEqual([committed(retried)])
      expect(await record()).toMatchObject({ status: 'succeeded', attempts: 1, leaseToken: null })
    })
  })

  // -------------------------------------------------------------------------------------------
  // 5. Records that may be executed anew: expired ones, and leased claims their owner abandoned.
  // -------------------------------------------------------------------------------------------
  describe('records that may be executed anew', () => {
    it('an expired record: a new request under the key executes anew', async () => {
      const owner = instance()
      const first = await runIdempotent(owner, request({ ttlSeconds: UNCACHED_TTL_SECONDS }), atomic())
      await expire()
      expect((await record()).expired).toBe(true)

      const again = await runIdempotent(owner, request({ fingerprint: 'fp-b', route: OTHER_ROUTE }), atomic())
      expect(again).toEqual(executedAs(committed(again)))
      expect(await record()).toMatchObject({
        fingerprint: 'fp-b', route: OTHER_ROUTE, status: 'succeeded', resourceId: committed(again), leaseToken: null, attempts: 1, expired: false,
      })
      expect(await recordCount()).toBe(1)
      expect(await businessRows()).toEqual([committed(first), committed(again)].sort())
    })

    it('a leased claim of the same request whose lease ran out is taken over by an atomic execution', async () => {
      await leasedClaim({ leaseMs: SHORT_LEASE_MS })
      await leaseRanOut()
      const outcome = await runIdempotent(instance(), request(), atomic())
      expect(outcome).toEqual(executedAs(committed(outcome), { takeover: true }))
      expect(await record()).toMatchObject({ fingerprint: 'fp-a', status: 'succeeded', resourceId: committed(outcome), leaseToken: null, attempts: 1 })
      expect(await recordCount()).toBe(1)
      expect(await businessRows()).toEqual([committed(outcome)])
    })

    it('a leased claim still running, or abandoned by another request, is not taken over', async () => {
      const running = await leasedClaim({ leaseMs: LEASE_MS })
      expect(await runIdempotent(instance(), request(), atomic())).toEqual({ kind: 'in_progress', reason: 'running' })
      expect(await runIdempotent(instance(), request({ fingerprint: 'fp-b' }), atomic())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
      await leasedClaim({ key: 'key-2', leaseMs: SHORT_LEASE_MS })
      await leaseRanOut('key-2')
      expect(await runIdempotent(instance(), request({ key: 'key-2', fingerprint: 'fp-b' }), atomic())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
      expect(await businessRows()).toEqual([])
      expect(await record()).toMatchObject({ status: 'processing', leaseToken: running.leaseToken, attempts: 1 })
      expect(await record('key-2')).toMatchObject({ status: 'processing', fingerprint: 'fp-a', attempts: 1 })
    })
  })

  // -------------------------------------------------------------------------------------------
  // 6. The processing lock lost under its owner (Redis flushed, or the lock expired while its
  //    renewals failed): a second owner reaches Postgres, and the unique index decides.
  // -------------------------------------------------------------------------------------------
  if (concurrentTransactions) {
    describe('the processing lock lost while its owner is in its transaction', () => {
      it('exactly one commits; the other waits on its record and replays its response', async () => {
        const first = hold()
        // In-process: a lock that expires under its owner, whose renewals all fail.
        const forgetful: Locks | undefined = redisPair ? undefined : { ...createMemoryLocks(), extend: async () => false }
        const owner = instance({ locks: forgetful, lockTtlMs: redisPair ? LOCK_TTL_MS : SHORT_LOCK_TTL_MS })
        const running = runIdempotent(owner, request(), atomic({ beforeCommit: first.step }))
        await first.reached
        if (redisPair) expect(await redisClients[0]!.del(processingLockKey(scope, 'key-1'))).toBe(1)
        else await delay(PAST_SHORT_LOCK_TTL_MS)

        // Redis: another process; in-process: the owner's own, whose lock table no longer holds the key.
        const duplicate = runIdempotent(instance({ locks: forgetful }), request(), atomic())
        await someoneWaitsOnALock('the second owner waits on the first one\'s record')
        first.release()
        const [executed, replayed] = await Promise.all([running, duplicate])
        expect(executed).toEqual(executedAs(committed(executed)))
        expectReplay(replayed, executed)
        expect(await businessRows()).toEqual([committed(executed)])
        expect(await recordCount()).toBe(1)
        expect(await record()).toMatchObject({ status: 'succeeded', attempts: 1 })
      })
    })
  }

  // -------------------------------------------------------------------------------------------
  // 7. Without a working lock the unique index alone decides: never a second execution.
  // -------------------------------------------------------------------------------------------
  if (redisPair) {
    describe('Redis unreachable', () => {
      it('executes anyway, degraded; a retry replays from Postgres, degraded as well', async () => {
        const executed = await runIdempotent(withoutRedis(), request(), atomic())
        expect(executed).toEqual(executedAs(committed(executed), { degraded: true }))
        expect(await record()).toMatchObject({ status: 'succeeded', responseStatus: 201, leaseToken: null, attempts: 1 })
        expectReplay(await runIdempotent(withoutRedis(), request(), atomic()), executed, { degraded: true })
        expect(await businessRows()).toEqual([committed(executed)])
      })

      it(`${CONCURRENT_REQUESTS} identical requests at once across two instances: one execution, the rest wait on the index and replay`, async () => {
        const instances = [withoutRedis(), withoutRedis()]
        // The winner holds its transaction a little, so that every other request meets it in flight.
        const operation = atomic({ beforeCommit: () => delay(200) })
        const outcomes = await Promise.all(Array.from({ length: CONCURRENT_REQUESTS }, (_, i) =>
          runIdempotent(instances[i % 2]!, request(), operation)))
        const executed = outcomes.filter(outcome => outcome.kind === 'executed')
        expect(executed).toHaveLength(1)
        expect(executed[0]).toEqual(executedAs(committed(executed[0]), { degraded: true }))
        for (const outcome of outcomes.filter(outcome => outcome.kind !== 'executed')) expectReplay(outcome, executed[0]!, { degraded: true })
        expect(await businessRows()).toEqual([committed(executed[0])])
        expect(await recordCount()).toBe(1)
      })

      it('Redis lost while the owner holds the lock: a duplicate runs degraded and replays the owner\'s response', async () => {
        const server = await startRedisServer()
        cleanUps.push(() => server.stop())
        const prefix = uniqueRedisPrefix('idempotency core lost')
        const reconnecting: RedisOptions = { ...failFast, keyPrefix: prefix, retryStrategy: attempt => Math.min(attempt * 100, 1_000) }
        const processOnServer = async () => {
          const client = new Redis(server.url, { ...reconnecting, lazyConnect: true })
          client.on('error', () => {})
          await client.connect()
          const shared = redisReplayTier(server.url, `${prefix}replay`, reconnecting)
          cleanUps.push(async () => {
            client.disconnect()
            await shared.dispose()
          })
          return { locks: createRedisLocks(client), shared }
        }
        const owner = instance(await processOnServer())
        const duplicate = instance(await processOnServer())
        const first = hold()
        const running = runIdempotent(owner, request(), atomic({ beforeCommit: first.step }))
        await first.reached
        await server.stop()
        const duplicated = runIdempotent(duplicate, request(), atomic())
        await someoneWaitsOnALock('the duplicate waits on the owner\'s record')
        first.release()
        const executed = await running
        expect(executed).toEqual(executedAs(committed(executed)))
        expectReplay(await duplicated, executed, { degraded: true })
        expect(await businessRows()).toEqual([committed(executed)])
        expect(await recordCount()).toBe(1)
      })
    })
  }
  else {
    describe('in-process locks in two instances', () => {
      it(`${CONCURRENT_REQUESTS} identical requests at once across two instances: exactly one execution, every other one replays`, async () => {
        const instances = [instance(), instance()]
        const operation = atomic({ beforeCommit: () => delay(200) })
        const outcomes = await Promise.all(Array.from({ length: CONCURRENT_REQUESTS }, (_, i) =>
          runIdempotent(instances[i % 2]!, request({ waitMs: WAIT_MS }), operation)))
        const executed = outcomes.filter(outcome => outcome.kind === 'executed')
        expect(executed).toHaveLength(1)
        expect(executed[0]).toEqual(executedAs(committed(executed[0])))
        for (const outcome of outcomes.filter(outcome => outcome.kind !== 'executed')) expectReplay(outcome, executed[0]!)
        expect(await businessRows()).toEqual([committed(executed[0])])
        expect(await recordCount()).toBe(1)
      })
    })
  }

  // -------------------------------------------------------------------------------------------
  // 8. Waiting on another's uncommitted record is bounded by the database's lock_timeout.
  // -------------------------------------------------------------------------------------------
  if (concurrentTransactions) {
    describe('lock_timeout', () => {
      it('a duplicate that waits longer than lock_timeout answers in progress; after the commit a retry replays', async () => {
        const shortWait = await anotherPool({ lockTimeoutMs: SHORT_LOCK_TIMEOUT_MS })
        // Nothing keeps the duplicate off Postgres: Redis is unreachable, or each instance has its own lock table.
        const unlocked = () => (redisPair ? withoutRedis : instance)({ database: shortWait })
        const notes = redisPair ? { degraded: true } : {}
        const owner = unlocked()
        const duplicate = unlocked()
        const first = hold()
        const running = runIdempotent(owner, request(), atomic({ beforeCommit: first.step }))
        await first.reached
        expect(await runIdempotent(duplicate, request(), atomic())).toEqual({ kind: 'in_progress', reason: 'running', ...notes })
        expect(await businessRows()).toEqual([])
        first.release()
        const executed = await running
        expect(executed).toEqual(executedAs(committed(executed), notes))
        expectReplay(await runIdempotent(duplicate, request(), atomic()), executed, notes)
        expect(await businessRows()).toEqual([committed(executed)])
        expect(await recordCount()).toBe(1)
      })
    })
  }

  // -------------------------------------------------------------------------------------------
  // 9. Leased mode: a claimed record with a fenced lease, the response stored by the owner's commit.
  // -------------------------------------------------------------------------------------------
  describe('atomic mode with execute(tx): claimed first, the writes and the response in one fenced transaction', () => {
    it('executes once, storing the response in the business row\'s transaction; replays on any instance; refuses another request', async () => {
      const owner = instance()
      const executed = await runIdempotent(owner, request(), leased())
      const tenantId = committed(executed)
      expect(executed).toEqual(executedAs(tenantId))
      expect(await record()).toMatchObject({
        status: 'succeeded',
        responseStatus: 201,
        responseBody: stored(created(tenantId)).body,
        resourceId: tenantId,
        error: null,
        leaseToken: null,
        leaseExpiresAt: null,
        attempts: 1,
      })
      await expectOneTransaction(tenantId)
      expectReplay(await runIdempotent(owner, request(), leased()), executed)
      expectReplay(await runIdempotent(instance(), request(), leased()), executed)
      expect(await runIdempotent(instance(), request({ fingerprint: 'fp-b', route: OTHER_ROUTE }), leased())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
      expect(await businessRows()).toEqual([tenantId])
      expect(await recordCount()).toBe(1)
    })

    it('a thrown 4xx problem rolls its writes back and is stored as the key\'s failure, then replayed', async () => {
      const owner = instance()
      const tenantId = newTenantId()
      const outcome = await runIdempotent(owner, request(), leased({ tenantId, fail: tenantExists(tenantId) }))
      const failure = storedProblem(tenantId, 'key-1')
      expect(outcome).toEqual({ kind: 'executed', response: failure })
      expect(await record()).toMatchObject({
        status: 'failed', responseStatus: 409, responseBody: failure.body, error: 'cart-already-ordered', leaseToken: null, leaseExpiresAt: null, attempts: 1,
      })
      expect(await businessRows()).toEqual([])
      expectReplay(await runIdempotent(owner, request(), leased()), outcome)
      expectReplay(await runIdempotent(instance(), request(), leased()), outcome)
      expect(await businessRows()).toEqual([])
    })

    it('an unexpected failure rolls back and ends the lease: the retry executes at once', async () => {
      const failure = new Error('provider exploded')
      await expect(runIdempotent(instance(), request(), leased({ fail: failure }))).rejects.toBe(failure)
      expect(await record()).toMatchObject({ status: 'processing', leaseToken: null, leaseLive: false, responseStatus: null, error: 'Error: provider exploded', attempts: 1 })
      expect(await businessRows()).toEqual([])

      const retried = await runIdempotent(instance(), request(), leased())
      expect(retried).toEqual(executedAs(committed(retried), { takeover: true }))
      expect(await record()).toMatchObject({ status: 'succeeded', error: null, leaseToken: null, attempts: 2 })
      expect(await businessRows()).toEqual([committed(retried)])
    })

    // PGlite: the owner's open transaction holds the only connection.
    if (concurrentTransactions) {
      it('while the owner runs: the same request is in progress, another one a conflict, a waiting one replays', async () => {
        const first = hold()
        const running = runIdempotent(instance(), request(), leased({ first: first.step }))
        await first.reached
        const other = instance()
        expect(await runIdempotent(other, request(), leased())).toEqual({ kind: 'in_progress', reason: 'running' })
        expect(await runIdempotent(other, request({ fingerprint: 'fp-b', route: OTHER_ROUTE }), leased())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
        const waiting = watch(runIdempotent(other, request({ waitMs: WAIT_MS }), leased()))
        await delay(STILL_WAITING_MS)
        expect(waiting.settled).toBe(false)
        first.release()
        const executed = await running
        expect(executed).toEqual(executedAs(committed(executed)))
        expectReplay(await waiting.promise, executed)
        expect(await businessRows()).toEqual([committed(executed)])
        expect(await record()).toMatchObject({ status: 'succeeded', attempts: 1 })
      })

      describe('lease lost', () => {
        /**
         * The owner (another process, its pool behind a proxy) claims, begins its commit's transaction
         * and freezes right there — its fence issued but held in the proxy, so the record is not locked.
         * Its lease runs out; another instance takes the claim over and executes. Then the owner resumes.
         */
        async function ownerOvertaken(writes: { owner: TenantWrite, taker: TenantWrite }) {
          const proxy = await startTcpProxy({ host: new URL(postgresAdminUrl).hostname, port: Number(new URL(postgresAdminUrl).port || 5432) })
          cleanUps.push(() => proxy.close())
          const owner = instance({ database: await anotherPool({ proxyPort: proxy.port }), leaseMs: SHORT_LEASE_MS })
          // Cleaned up in reverse: the held traffic goes on before the pool closes.
          cleanUps.push(async () => proxy.resume())
          let markFrozen!: () => void
          const frozen = new Promise<void>((resolve) => { markFrozen = resolve })
          const freeze = () => {
            proxy.pause()
            markFrozen()
          }
          const running = runIdempotent(owner, request(), leased({ ...writes.owner, first: freeze }))
          await frozen
          await leaseRanOut()
          const taken = await runIdempotent(instance(), request(), leased(writes.taker))
          proxy.resume()
          return { owner, running, taken }
        }

        it('an owner whose lease was taken over stores nothing and answers lease_lost', async () => {
          // Each execution writes a row of its own (as an order gets a fresh id).
          const { owner, running, taken } = await ownerOvertaken({ owner: {}, taker: {} })
          expect(taken).toEqual(executedAs(committed(taken), { takeover: true }))
          expect(await running).toEqual({ kind: 'in_progress', reason: 'lease_lost' })
          expect(await record()).toMatchObject({ status: 'succeeded', resourceId: committed(taken), leaseToken: null, attempts: 2 })
          expect(await recordCount()).toBe(1)
          expect(await businessRows()).toEqual([committed(taken)])
          // Its cache learnt nothing: the owner's instance replays the taker's response.
          expectReplay(await runIdempotent(owner, request(), leased()), taken)
        })

        it('an owner whose lease was taken over answers lease_lost even when its writes collide with the new owner\'s', async () => {
          // The same request executed again writes the same business row: the stale owner's insert
          // meets the new owner's committed one, in a transaction its fence already found lost.
          const tenantId = newTenantId()
          const { running, taken } = await ownerOvertaken({ owner: { tenantId }, taker: { tenantId } })
          expect(taken).toEqual(executedAs(tenantId, { takeover: true }))
          expect(await running.catch((error: unknown) => ({ rejectedWith: String(error), constraint: violatedUniqueConstraint(error) })))
            .toEqual({ kind: 'in_progress', reason: 'lease_lost' })
          expect(await record()).toMatchObject({ status: 'succeeded', resourceId: tenantId, leaseToken: null, attempts: 2 })
          expect(await businessRows()).toEqual([tenantId])
        })
      })
    }
  })

  describe('leased mode: the work runs with no transaction open, its response stored after it, fenced', () => {
    /** Work outside the database (an outside API, say): counts its runs. */
    function outside(options: { first?: () => Promise<void> | void, fail?: unknown, result?: IdempotentResult } = {}) {
      const runs = { count: 0 }
      const operation: LeasedOperation = {
        mode: 'leased',
        execute: async () => {
          runs.count++
          await options.first?.()
          if (options.fail) throw options.fail
          return options.result ?? created('ten_outside')
        },
      }
      return { runs, operation }
    }

    it('the claim is committed before the work starts: a duplicate is answered at once, then replays; the work ran once', async () => {
      const first = hold()
      const work = outside({ first: first.step })
      const running = runIdempotent(instance(), request(), work.operation)
      await first.reached
      // Committed, not only written: read on another connection (on PGlite, the only one: no transaction holds it).
      expect(await record()).toMatchObject({ status: 'processing', leaseLive: true, responseStatus: null })
      expect(await runIdempotent(instance(), request(), outside().operation)).toEqual({ kind: 'in_progress', reason: 'running' })
      expect(await runIdempotent(instance(), request({ fingerprint: 'fp-b', route: OTHER_ROUTE }), outside().operation)).toEqual({ kind: 'conflict', firstRoute: ROUTE })
      first.release()
      const executed = await running
      expect(executed).toEqual({ kind: 'executed', response: stored(created('ten_outside')) })
      expect(await record()).toMatchObject({ status: 'succeeded', responseStatus: 201, resourceId: 'ten_outside', leaseToken: null, leaseExpiresAt: null, attempts: 1 })
      expectReplay(await runIdempotent(instance(), request(), outside().operation), executed)
      expect(work.runs.count).toBe(1)
      expect(await recordCount()).toBe(1)
    })

    it('a thrown 4xx is stored and replayed; an unexpected failure ends the lease, so the retry runs the work again', async () => {
      const tenantId = newTenantId()
      const refused = outside({ fail: tenantExists(tenantId) })
      const outcome = await runIdempotent(instance(), request(), refused.operation)
      expect(outcome).toEqual({ kind: 'executed', response: storedProblem(tenantId, 'key-1') })
      expectReplay(await runIdempotent(instance(), request(), outside().operation), outcome)
      expect(refused.runs.count).toBe(1)

      const failure = new Error('provider timed out')
      const failing = outside({ fail: failure })
      await expect(runIdempotent(instance(), request({ key: 'key-2' }), failing.operation)).rejects.toBe(failure)
      expect(await record('key-2')).toMatchObject({ status: 'processing', leaseToken: null, leaseLive: false, responseStatus: null, error: 'Error: provider timed out' })
      const retry = outside()
      const retried = await runIdempotent(instance(), request({ key: 'key-2' }), retry.operation)
      expect(retried).toEqual({ kind: 'executed', response: stored(created('ten_outside'), 'key-2'), takeover: true })
      expect(await record('key-2')).toMatchObject({ status: 'succeeded', error: null, attempts: 2 })
      expect(failing.runs.count + retry.runs.count).toBe(2)
    })

    if (concurrentTransactions) {
      it('an owner whose lease ran out while its work ran stores nothing and answers lease_lost; the taker\'s response is the key\'s', async () => {
        const proxy = await startTcpProxy({ host: new URL(postgresAdminUrl).hostname, port: Number(new URL(postgresAdminUrl).port || 5432) })
        cleanUps.push(() => proxy.close())
        const owner = instance({ database: await anotherPool({ proxyPort: proxy.port }), leaseMs: SHORT_LEASE_MS })
        cleanUps.push(async () => proxy.resume())
        const first = hold()
        const slow = outside({ first: first.step, result: created('ten_owner') })
        const running = runIdempotent(owner, request(), slow.operation)
        await first.reached
        // Its lease renewals no longer reach Postgres, as from a frozen or partitioned instance.
        proxy.pause()
        await leaseRanOut()
        const taker = outside({ result: created('ten_taker') })
        const taken = await runIdempotent(instance(), request(), taker.operation)
        expect(taken).toEqual({ kind: 'executed', response: stored(created('ten_taker')), takeover: true })
        proxy.resume()
        first.release()
        expect(await running).toEqual({ kind: 'in_progress', reason: 'lease_lost' })
        expect(await record()).toMatchObject({ status: 'succeeded', resourceId: 'ten_taker', leaseToken: null, attempts: 2 })
        // The work itself ran twice: why a leased handler passes its key on to whatever it calls.
        expect(slow.runs.count + taker.runs.count).toBe(2)
      })
    }
  })
}

describeWithServices('idempotency core contract: Postgres + Redis locks', ['postgres', 'redis'], () => {
  idempotencyCoreContract({ driver: 'postgres', locks: 'redis' })
})

describeWithServices('idempotency core contract: Postgres + in-process locks', ['postgres'], () => {
  idempotencyCoreContract({ driver: 'postgres', locks: 'memory' })
})

describe('idempotency core contract: PGlite + in-process locks', () => {
  idempotencyCoreContract({ driver: 'pglite', locks: 'memory' })
})
