import { createHash, createHmac, randomUUID } from 'node:crypto'
import { sql } from 'drizzle-orm'
import { createStorage, type Storage } from 'unstorage'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { idempotencyRecords, createRedisLocks } from 'nuxt-idempotency/core'
import { type AtomicOperation, type IdempotencyDeps, type IdempotentRequest, runIdempotent, createReplayCache } from 'nuxt-idempotency/core'
import { CACHE_EXPIRY_MARGIN_MS, type RejectedEntry } from '../../packages/nuxt-idempotency/src/runtime/core/replay-cache'
import { openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { pollUntil } from '../support/poll'
import { connectSharedTestRedis, type TestRedisConnection } from '../support/redis-topologies'
import { describeWithServices, uniqueRedisPrefix } from '../support/services'

// The shared replay tier (server/idempotency/replay-cache.ts) on real Redis and Postgres: whoever can
// write to Redis plants entries under the very key the cache reads. An instance must answer from
// Postgres instead of a forged entry (a 201 of someone else's making, a standing 422), and never
// from an entry past its record's expires_at.

const SIGNING_KEY = 'replay-cache-signed-test-key-0123456789abcdef'
const ROUTE = 'POST /api/orders'
const TTL_SECONDS = 3_600

describeWithServices('replay cache: shared entries are signed and bound to their record', ['postgres', 'redis'], () => {
  let database: SuiteDatabase
  let connection: TestRedisConnection
  let storage: Storage
  let scope: string
  let executions: number
  let rejections: RejectedEntry[]

  beforeAll(async () => {
    database = await openSuiteDatabase('postgres', 'replay_cache_signed')
    connection = await connectSharedTestRedis('replay cache signed', { prefix: uniqueRedisPrefix('replay cache signed') })
    storage = createStorage({ driver: connection.storageDriver })
  }, 60_000)

  afterAll(async () => {
    await storage?.dispose()
    await connection?.close()
    await database?.close()
  })

  beforeEach(() => {
    scope = `tenant:signed_${randomUUID()}`
    executions = 0
    rejections = []
  })

  /** A fresh process: its own (empty) local tier on the shared Redis tier and the one database. */
  function instance(): IdempotencyDeps {
    return {
      database: database.handle,
      locks: createRedisLocks(connection.client),
      replays: createReplayCache({ maxBytes: 1_000_000, shared: { storage, signingKey: SIGNING_KEY }, onRejected: reason => rejections.push(reason) }),
      lockTtlMs: 10_000,
      leaseMs: 10_000,
    }
  }

  const request = (overrides: Partial<IdempotentRequest> = {}): IdempotentRequest => ({
    scope, route: ROUTE, key: 'key-1', fingerprint: 'fp-genuine', requestId: `req_${randomUUID()}`, ttlSeconds: TTL_SECONDS, waitMs: 0, annotateBody: true, ...overrides,
  })

  /** The genuine operation: each plan answers a body naming its own number (plans that lose to a record are not counted apart). */
  const operation = (): AtomicOperation => ({
    mode: 'atomic',
    plan: () => ({ statements: [], result: { status: 201, body: { object: 'order', execution: ++executions } } }),
  })

  /** The key the cache stores (scope, key) under: what anyone reading the code, or Redis, can find. */
  const storageKey = (key = 'key-1') => createHash('sha256').update(`${scope}\n${key}`).digest('base64url')

  const forgedRecord = (overrides: Record<string, unknown> = {}) => {
    const expiresAt = Date.now() + TTL_SECONDS * 1000
    return {
      scope, key: 'key-1', route: ROUTE, fingerprint: 'fp-genuine',
      response: { status: 201, body: { object: 'order', forged: true, idempotency: { key: 'key-1', replayed: false } }, headers: {} },
      cacheUntil: expiresAt - CACHE_EXPIRY_MARGIN_MS, expiresAt,
      ...overrides,
    }
  }
  const signedWith = (key: string, record: object) => {
    const json = JSON.stringify(record)
    return JSON.stringify({ record: json, mac: createHmac('sha256', key).update(json).digest('base64url') })
  }

  /** Executes the request once, and waits until the shared tier holds its genuine entry. */
  async function executeAndShare() {
    const executed = await runIdempotent(instance(), request(), operation())
    expect(executed.kind).toBe('executed')
    await pollUntil('the shared tier holds the response', async () => (await storage.getItem(storageKey())) !== null)
    return executed.kind === 'executed' ? executed.response.body : undefined
  }

  const recordCount = async () => (await database.handle.db.select({ n: sql<number>`count(*)::int` }).from(idempotencyRecords).where(sql`${idempotencyRecords.scope} = ${scope}`))[0]!.n

  it('a forged 201 planted under the cache\'s key (unsigned, signed with another key, or its record rewritten) is ignored: the replay is Postgres\' genuine response', async () => {
    const genuine = await executeAndShare()
    const forgeries = [
      // The entry shape before entries were signed: a bare record.
      JSON.stringify(forgedRecord()),
      signedWith('not-the-deployment-key-0123456789abcdef', forgedRecord()),
      JSON.stringify({ record: JSON.stringify(forgedRecord()), mac: JSON.parse(String(await storage.getItemRaw(storageKey()))).mac }),
    ]
    for (const forgery of forgeries) {
      await storage.setItem(storageKey(), forgery)
      const replay = await runIdempotent(instance(), request(), operation())
      expect(replay).toEqual({ kind: 'replayed', response: { status: 201, body: genuine, headers: {} } })
    }
    expect(rejections).toEqual(['signature', 'signature', 'signature'])
    expect(await recordCount()).toBe(1)
  })

  it('a forged standing 422 (an entry for another request under the key) is ignored: the request replays its own response', async () => {
    const genuine = await executeAndShare()
    await storage.setItem(storageKey(), signedWith('attacker-guess-key-0123456789abcdef0123', forgedRecord({ fingerprint: 'fp-someone-else' })))
    expect(await runIdempotent(instance(), request(), operation())).toEqual({ kind: 'replayed', response: { status: 201, body: genuine, headers: {} } })
    expect(rejections).toEqual(['signature'])
  })

  it('a genuinely signed entry moved to another key, or for another request, does not answer there', async () => {
    await executeAndShare()
    const entry = String(await storage.getItemRaw(storageKey()))
    // key-2 was never used: it executes, whatever key-1's entry says.
    await storage.setItem(storageKey('key-2'), entry)
    expect(await runIdempotent(instance(), request({ key: 'key-2' }), operation())).toMatchObject({ kind: 'executed' })
    // Another body under key-1: Postgres decides the conflict, not the cache.
    expect(await runIdempotent(instance(), request({ fingerprint: 'fp-other' }), operation())).toEqual({ kind: 'conflict', firstRoute: ROUTE })
    expect(rejections).toEqual(['mismatch', 'mismatch'])
    expect(await recordCount()).toBe(2)
  })

  it('an entry past its record\'s expires_at is not served: the record expired in Postgres executes anew', async () => {
    await executeAndShare()
    // The record expired (by the database's clock); the entry says so too, signed with the right key.
    await database.handle.db.update(idempotencyRecords).set({ expiresAt: sql`now() - interval '1 second'` }).where(sql`${idempotencyRecords.scope} = ${scope}`)
    const expiredAt = Date.now() - 1000
    await storage.setItem(storageKey(), signedWith(SIGNING_KEY, forgedRecord({ expiresAt: expiredAt, cacheUntil: expiredAt - CACHE_EXPIRY_MARGIN_MS })))

    const again = await runIdempotent(instance(), request(), operation())
    expect(again).toMatchObject({ kind: 'executed', response: { status: 201, body: { object: 'order', execution: expect.any(Number) } } })
    expect(again.kind === 'executed' && again.response.body.forged).toBe(undefined)
    expect(rejections).toEqual(['expired'])
    expect(await recordCount()).toBe(1)
  })

  it('the entry an execution shares carries its record\'s own expires_at from the database row', async () => {
    await executeAndShare()
    const [row] = await database.handle.db.select({ expiresAt: idempotencyRecords.expiresAt }).from(idempotencyRecords).where(sql`${idempotencyRecords.scope} = ${scope}`)
    const { record } = JSON.parse(String(await storage.getItemRaw(storageKey()))) as { record: string }
    expect(JSON.parse(record)).toMatchObject({ scope, key: 'key-1', fingerprint: 'fp-genuine', expiresAt: row!.expiresAt.getTime(), cacheUntil: row!.expiresAt.getTime() - CACHE_EXPIRY_MARGIN_MS })
  })
})
