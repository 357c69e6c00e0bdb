import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import { eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { Database } from '@idempotent-checkout/db-kit'
import { tenants } from '../../server/db/schema'
import { idempotencyRecords } from 'nuxt-idempotency/core'
import { createIdempotencyStore, type IdempotencyStore } from 'nuxt-idempotency/core'
import { canTakeOver, type Claim, type ClaimInput, type RecordView, type StoredResponse } from '../../packages/nuxt-idempotency/src/runtime/core/store'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { describeWithServices } from '../support/services'

const LONG_LEASE_MS = 60_000
const SHORT_LEASE_MS = 200
const PAST_SHORT_LEASE_MS = 400
const TTL_SECONDS = 3_600
/** The columns of a claim that has no result yet. */
const nothingStored = { responseStatus: null, responseBody: null, responseHeaders: null, resourceType: null, resourceId: null, error: null }
const CONCURRENT_CLAIMANTS = 20

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const createdResponse = (orderId: string): StoredResponse => ({
  status: 201,
  // Deliberately unsorted keys: the stored body must come back in the order it was written.
  body: { id: orderId, object: 'order', status: 'pending_payment', amount: 150000 },
  headers: { Location: `/api/orders/${orderId}` },
  resourceType: 'order',
  resourceId: orderId,
})

const cartTakenResponse: StoredResponse = {
  status: 409,
  body: { type: '/problems/cart-already-ordered', title: 'Cart already ordered', status: 409, orderId: 'ord_existing' },
  error: 'cart-already-ordered',
}

/**
 * The behaviour every database the app runs on must share. `concurrentTransactions` is false for
 * PGlite, whose single connection runs one transaction at a time.
 */
function idempotencyStoreContract(driver: DatabaseDriver, concurrentTransactions: boolean) {
  let database: SuiteDatabase
  let db: Database
  let store: IdempotencyStore
  let scope: string

  beforeAll(async () => {
    // One connection per concurrent claimant, so the race happens in Postgres, not in the pool queue.
    database = await openSuiteDatabase(driver, 'idempotency_store', { poolSize: CONCURRENT_CLAIMANTS + 2 })
    db = database.handle.db
    store = createIdempotencyStore(db)
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  beforeEach(() => {
    // A fresh scope per test: records left behind by one test never meet the next.
    scope = `tenant:contract_${randomUUID()}`
  })

  const claimInput = (overrides: Partial<ClaimInput> = {}): ClaimInput => ({
    scope,
    key: 'key-1',
    route: 'POST /api/orders',
    fingerprint: 'fingerprint-a',
    requestId: 'req_first',
    leaseMs: LONG_LEASE_MS,
    ttlSeconds: TTL_SECONDS,
    ...overrides,
  })

  async function claim(overrides: Partial<ClaimInput> = {}): Promise<Claim> {
    const claimed = await store.insert(claimInput(overrides))
    expect(claimed).toBeDefined()
    return claimed!
  }

  async function find(key = 'key-1'): Promise<RecordView> {
    const record = await store.find(scope, key)
    expect(record).toBeDefined()
    return record!
  }

  /** A claim whose owner stopped renewing: its short lease has run out. */
  async function abandonedClaim(overrides: Partial<ClaimInput> = {}): Promise<Claim> {
    const abandoned = await claim({ leaseMs: SHORT_LEASE_MS, ...overrides })
    await delay(PAST_SHORT_LEASE_MS)
    return abandoned
  }

  async function expire(recordId: string): Promise<void> {
    await db.update(idempotencyRecords).set({ expiresAt: sql`now() - interval '1 second'` })
      .where(eq(idempotencyRecords.id, recordId))
  }

  async function tenantExists(tenantId: string): Promise<boolean> {
    const rows = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId))
    return rows.length === 1
  }

  /** Business work that writes a tenant row, so a test can see whether its transaction committed. */
  function tenantWrite(tenantId: string, response: StoredResponse) {
    return async (tx: Database) => {
      await tx.insert(tenants).values({ id: tenantId, name: 'contract' })
      return response
    }
  }

  const newTenantId = () => `ten_${randomUUID()}`

  describe('insert', () => {
    it('claims a new (scope, key) with a lease token and a processing record', async () => {
      const { record, leaseToken } = await claim()
      expect(leaseToken).toMatch(UUID)
      expect(record).toMatchObject({
        scope,
        key: 'key-1',
        route: 'POST /api/orders',
        fingerprint: 'fingerprint-a',
        status: 'processing',
        leaseToken,
        attempts: 1,
        requestId: 'req_first',
        ...nothingStored,
      })
      // Both come from the same statement's now(): the differences are exact.
      expect(record.leaseExpiresAt!.getTime() - record.createdAt.getTime()).toBe(LONG_LEASE_MS)
      expect(record.expiresAt.getTime() - record.createdAt.getTime()).toBe(TTL_SECONDS * 1000)
    })

    it('returns undefined for a (scope, key) that exists and leaves the first claim intact', async () => {
      const first = await claim()
      expect(await store.insert(claimInput({ fingerprint: 'fingerprint-b', requestId: 'req_second' }))).toBeUndefined()
      const record = await find()
      expect(record.leaseToken).toBe(first.leaseToken)
      expect(record.fingerprint).toBe('fingerprint-a')
      expect(record.requestId).toBe('req_first')
    })

    it('treats the same key in another scope, and another key in the same scope, as independent', async () => {
      const first = await claim()
      const otherScope = await store.insert(claimInput({ scope: `${scope}_other` }))
      const otherKey = await store.insert(claimInput({ key: 'key-2' }))
      expect(otherScope).toBeDefined()
      expect(otherKey).toBeDefined()
      expect(new Set([first.record.id, otherScope!.record.id, otherKey!.record.id]).size).toBe(3)
    })

    it(`lets exactly one of ${CONCURRENT_CLAIMANTS} concurrent inserts of one key win`, async () => {
      const results = await Promise.all(Array.from({ length: CONCURRENT_CLAIMANTS }, (_, i) =>
        store.insert(claimInput({ requestId: `req_${i}` }))))
      const winners = results.filter(result => result !== undefined)
      expect(winners).toHaveLength(1)
      expect((await find()).leaseToken).toBe(winners[0]!.leaseToken)
    })
  })

  describe('find', () => {
    it('returns undefined for an unknown key', async () => {
      expect(await store.find(scope, 'never-claimed')).toBeUndefined()
    })

    it('reports a live lease and an unexpired record right after the claim', async () => {
      const { record } = await claim()
      const found = await find()
      expect(found.id).toBe(record.id)
      expect(found.leaseLive).toBe(true)
      expect(found.expired).toBe(false)
      expect(found.leaseRemainingMs).toBeGreaterThan(0)
      expect(found.leaseRemainingMs).toBeLessThanOrEqual(LONG_LEASE_MS)
    })

    it('reports the lease as run out once leaseMs passed', async () => {
      await abandonedClaim()
      const found = await find()
      expect(found.leaseLive).toBe(false)
      expect(found.leaseRemainingMs).toBe(0)
      expect(found.expired).toBe(false)
      expect(found.status).toBe('processing')
    })
  })

  describe('commit', () => {
    it('a response that cannot be stored rolls the business write back and rejects: nothing half-committed', async () => {
      const owner = await claim()
      const tenantId = newTenantId()
      // A status past the integer column's range: storing this response fails inside the
      // transaction, in the same round trip as the COMMIT, which Postgres then turns into a ROLLBACK.
      const unstorable: StoredResponse = { ...createdResponse('ord_unstorable'), status: 3_000_000_000 }
      await expect(store.commit(owner, tenantWrite(tenantId, unstorable))).rejects.toThrow()
      expect(await tenantExists(tenantId)).toBe(false)
      expect(await find()).toMatchObject({ status: 'processing', leaseToken: owner.leaseToken, responseStatus: null, resourceId: null })
    })

    it('stores the response and the business write in one transaction', async () => {
      const owner = await claim()
      const tenantId = newTenantId()
      const response = createdResponse('ord_committed')
      const outcome = await store.commit(owner, tenantWrite(tenantId, response))
      expect(outcome).toEqual({ kind: 'committed', response })
      expect(await tenantExists(tenantId)).toBe(true)

      const record = await find()
      expect(record).toMatchObject({
        status: 'succeeded',
        responseStatus: 201,
        responseBody: response.body,
        responseHeaders: response.headers,
        resourceType: 'order',
        resourceId: 'ord_committed',
        error: null,
        leaseToken: null,
        leaseExpiresAt: null,
        leaseLive: false,
        attempts: 1,
      })
      // Replays must be byte-for-byte the first response, key order included.
      expect(JSON.stringify(record.responseBody)).toBe(JSON.stringify(response.body))
    })

    it('stores a 4xx response returned by the work as failed', async () => {
      const owner = await claim()
      await store.commit(owner, async () => cartTakenResponse)
      expect(await find()).toMatchObject({ status: 'failed', responseStatus: 409, error: 'cart-already-ordered', leaseToken: null })
    })

    it('rolls back the business write and keeps the claim when the work throws', async () => {
      const owner = await claim()
      const tenantId = newTenantId()
      const failure = new Error('payment provider exploded')
      await expect(store.commit(owner, async (tx) => {
        await tenantWrite(tenantId, createdResponse('ord_never'))(tx)
        throw failure
      })).rejects.toBe(failure)

      expect(await tenantExists(tenantId)).toBe(false)
      const record = await find()
      expect(record).toMatchObject({ status: 'processing', leaseToken: owner.leaseToken, responseStatus: null, responseBody: null })
      expect(record.leaseLive).toBe(true)

      // Nothing stayed locked or half-written: the owner can still commit.
      const retried = await store.commit(owner, tenantWrite(tenantId, createdResponse('ord_retried')))
      expect(retried.kind).toBe('committed')
      expect(await tenantExists(tenantId)).toBe(true)
    })

    it('rolls everything back when beforeCommit throws after the record was updated', async () => {
      const owner = await claim()
      const tenantId = newTenantId()
      const failure = new Error('fail-before-commit')
      await expect(store.commit(owner, tenantWrite(tenantId, createdResponse('ord_faulted')), async () => {
        throw failure
      })).rejects.toBe(failure)
      expect(await tenantExists(tenantId)).toBe(false)
      expect(await find()).toMatchObject({ status: 'processing', leaseToken: owner.leaseToken, responseStatus: null })
    })

    it('lets an owner whose lease ran out commit while nobody took over: the token fences, not the clock', async () => {
      const slowOwner = await abandonedClaim()
      expect((await find()).leaseLive).toBe(false)
      const tenantId = newTenantId()
      expect((await store.commit(slowOwner, tenantWrite(tenantId, createdResponse('ord_slow')))).kind).toBe('committed')
      expect(await tenantExists(tenantId)).toBe(true)
      expect(await find()).toMatchObject({ status: 'succeeded', resourceId: 'ord_slow' })
    })

    it('refuses a second commit with the same token once the response is stored', async () => {
      const owner = await claim()
      await store.commit(owner, tenantWrite(newTenantId(), createdResponse('ord_first')))
      // The fence travels with the work's statements: the work may run, but its writes roll back.
      const secondTenant = newTenantId()
      expect(await store.commit(owner, tenantWrite(secondTenant, createdResponse('ord_second')))).toEqual({ kind: 'lease-lost' })
      expect(await tenantExists(secondTenant)).toBe(false)
      expect((await find()).resourceId).toBe('ord_first')
    })
  })

  describe('storeFenced', () => {
    it('stores a 4xx response as failed and ends the lease', async () => {
      const owner = await claim()
      expect(await store.storeFenced(owner, cartTakenResponse)).toBe(true)
      expect(await find()).toMatchObject({
        status: 'failed',
        responseStatus: 409,
        responseBody: cartTakenResponse.body,
        responseHeaders: {},
        resourceType: null,
        resourceId: null,
        error: 'cart-already-ordered',
        leaseToken: null,
        leaseExpiresAt: null,
        leaseLive: false,
      })
    })
  })

  describe('canTakeOver', () => {
    it('is false while the owner holds a live lease', async () => {
      await claim()
      expect(canTakeOver(await find(), 'fingerprint-a')).toBe(false)
      expect(canTakeOver(await find(), 'fingerprint-b')).toBe(false)
    })

    it('is true for the same request once the lease ran out, false for another fingerprint', async () => {
      await abandonedClaim()
      const record = await find()
      expect(canTakeOver(record, 'fingerprint-a')).toBe(true)
      expect(canTakeOver(record, 'fingerprint-b')).toBe(false)
    })

    it('is false for a finished record that has not expired: it replays instead', async () => {
      const owner = await claim()
      await store.commit(owner, async () => createdResponse('ord_done'))
      expect(canTakeOver(await find(), 'fingerprint-a')).toBe(false)
      expect(canTakeOver(await find(), 'fingerprint-b')).toBe(false)
    })

    it('is true for an expired finished record, whatever the fingerprint', async () => {
      const owner = await claim()
      await store.commit(owner, async () => createdResponse('ord_old'))
      await expire(owner.record.id)
      const record = await find()
      expect(record.expired).toBe(true)
      expect(canTakeOver(record, 'fingerprint-a')).toBe(true)
      expect(canTakeOver(record, 'fingerprint-b')).toBe(true)
    })

    it('is true for an expired abandoned record with another fingerprint', async () => {
      const abandoned = await abandonedClaim()
      await expire(abandoned.record.id)
      expect(canTakeOver(await find(), 'fingerprint-b')).toBe(true)
    })

    it('is false for an expired record whose owner still holds a live lease', async () => {
      const owner = await claim()
      await expire(owner.record.id)
      expect(canTakeOver(await find(), 'fingerprint-b')).toBe(false)
      expect(await store.takeOver(await find(), claimInput({ fingerprint: 'fingerprint-b' }))).toBeUndefined()
    })
  })

  describe('takeOver', () => {
    it('gives the same request a new lease token after the lease ran out, counting the attempt', async () => {
      const first = await abandonedClaim()
      const second = await store.takeOver(await find(), claimInput({ requestId: 'req_retry' }))
      expect(second).toBeDefined()
      expect(second!.leaseToken).toMatch(UUID)
      expect(second!.leaseToken).not.toBe(first.leaseToken)
      expect(second!.record).toMatchObject({
        id: first.record.id,
        status: 'processing',
        leaseToken: second!.leaseToken,
        attempts: 2,
        fingerprint: 'fingerprint-a',
        // The record keeps the first request's id: it names the request that created it.
        requestId: 'req_first',
      })
      expect((await find()).leaseLive).toBe(true)
    })

    it('restarts the TTL on takeover, so a result stored just before the old expiry still replays', async () => {
      const first = await abandonedClaim()
      await db.update(idempotencyRecords).set({ expiresAt: sql`now() + interval '1 second'` })
        .where(eq(idempotencyRecords.id, first.record.id))
      const second = await store.takeOver(await find(), claimInput())
      const lifetimeMs = second!.record.expiresAt.getTime() - second!.record.updatedAt.getTime()
      expect(lifetimeMs).toBe(TTL_SECONDS * 1000)
    })

    it('returns undefined while the lease is live, or for another fingerprint', async () => {
      await claim({ leaseMs: SHORT_LEASE_MS })
      expect(await store.takeOver(await find(), claimInput())).toBeUndefined()
      await delay(PAST_SHORT_LEASE_MS)
      expect(await store.takeOver(await find(), claimInput({ fingerprint: 'fingerprint-b' }))).toBeUndefined()
      expect((await find()).attempts).toBe(1)
    })

    it('returns undefined when the record changed since it was read', async () => {
      await abandonedClaim()
      const staleView = await find()
      expect(await store.takeOver(staleView, claimInput())).toBeDefined()
      // The view still says "lease ran out", but the row now has a live lease.
      expect(await store.takeOver(staleView, claimInput())).toBeUndefined()
      expect((await find()).attempts).toBe(2)
    })

    it('reclaims an expired record as new: attempts, fingerprint, request and response reset', async () => {
      // Every column a reclaim must reset is set first: a second attempt that stored a failure.
      const abandoned = await abandonedClaim()
      const retry = await store.takeOver(await find(), claimInput())
      const failureAboutAnOrder: StoredResponse = {
        ...cartTakenResponse,
        headers: { Link: '</api/orders/ord_existing>; rel="related"' },
        resourceType: 'order',
        resourceId: 'ord_existing',
      }
      expect(await store.storeFenced(retry!, failureAboutAnOrder)).toBe(true)
      await expire(abandoned.record.id)
      expect(await find()).toMatchObject({
        attempts: 2,
        status: 'failed',
        responseStatus: 409,
        responseHeaders: failureAboutAnOrder.headers,
        resourceType: 'order',
        resourceId: 'ord_existing',
        error: 'cart-already-ordered',
        expired: true,
      })

      const input = claimInput({ fingerprint: 'fingerprint-b', requestId: 'req_new', route: 'POST /api/webhooks/standard', ttlSeconds: 120 })
      const reclaimed = await store.takeOver(await find(), input)
      expect(reclaimed).toBeDefined()
      expect(reclaimed!.record).toMatchObject({
        id: abandoned.record.id,
        status: 'processing',
        leaseToken: reclaimed!.leaseToken,
        attempts: 1,
        fingerprint: 'fingerprint-b',
        route: 'POST /api/webhooks/standard',
        requestId: 'req_new',
        ...nothingStored,
      })
      const record = reclaimed!.record
      expect(record.createdAt.getTime()).toBeGreaterThan(abandoned.record.createdAt.getTime())
      expect(record.expiresAt.getTime() - record.createdAt.getTime()).toBe(120_000)
      expect(record.leaseExpiresAt!.getTime() - record.createdAt.getTime()).toBe(LONG_LEASE_MS)
      const found = await find()
      expect(found.expired).toBe(false)
      expect(found.leaseLive).toBe(true)
    })

    it(`lets exactly one of ${CONCURRENT_CLAIMANTS} concurrent takeovers of an abandoned record win`, async () => {
      await abandonedClaim()
      const abandoned = await find()
      const results = await Promise.all(Array.from({ length: CONCURRENT_CLAIMANTS }, (_, i) =>
        store.takeOver(abandoned, claimInput({ requestId: `req_${i}` }))))
      const winners = results.filter(result => result !== undefined)
      expect(winners).toHaveLength(1)
      expect(await find()).toMatchObject({ leaseToken: winners[0]!.leaseToken, attempts: 2 })
    })

    it(`lets exactly one of ${CONCURRENT_CLAIMANTS} concurrent reclaims of an expired record win`, async () => {
      const owner = await claim()
      await store.commit(owner, async () => createdResponse('ord_old'))
      await expire(owner.record.id)
      const expired = await find()
      const results = await Promise.all(Array.from({ length: CONCURRENT_CLAIMANTS }, (_, i) =>
        store.takeOver(expired, claimInput({ fingerprint: `fingerprint-${i}`, requestId: `req_${i}` }))))
      const winners = results.filter(result => result !== undefined)
      expect(winners).toHaveLength(1)
      expect(await find()).toMatchObject({
        leaseToken: winners[0]!.leaseToken,
        fingerprint: winners[0]!.record.fingerprint,
        attempts: 1,
        status: 'processing',
      })
    })
  })

  describe('fencing', () => {
    it('an owner whose lease was taken over can store nothing; the new owner stores its response', async () => {
      const ownerA = await abandonedClaim()
      const ownerB = (await store.takeOver(await find(), claimInput({ requestId: 'req_retry' })))!
      expect(ownerB).toBeDefined()

      const tenantOfA = newTenantId()
      expect(await store.commit(ownerA, tenantWrite(tenantOfA, createdResponse('ord_from_a')))).toEqual({ kind: 'lease-lost' })
      expect(await tenantExists(tenantOfA)).toBe(false)
      expect(await store.storeFenced(ownerA, cartTakenResponse)).toBe(false)
      expect(await store.renew(ownerA, LONG_LEASE_MS)).toBe(false)
      await store.release(ownerA, 'stale owner gave up')
      expect(await find()).toMatchObject({ status: 'processing', leaseToken: ownerB.leaseToken, leaseLive: true, error: null })

      const tenantOfB = newTenantId()
      const outcome = await store.commit(ownerB, tenantWrite(tenantOfB, createdResponse('ord_from_b')))
      expect(outcome.kind).toBe('committed')
      expect(await tenantExists(tenantOfB)).toBe(true)
      expect(await find()).toMatchObject({
        status: 'succeeded',
        responseStatus: 201,
        responseBody: createdResponse('ord_from_b').body,
        resourceId: 'ord_from_b',
        attempts: 2,
      })
    })

    // Needs a second connection while the owner's transaction is open.
    if (concurrentTransactions) it('a committing owner is never overtaken, even when its lease runs out meanwhile', async () => {
      const owner = await claim({ leaseMs: SHORT_LEASE_MS })
      let finishWork!: () => void
      const workMayFinish = new Promise<void>((resolve) => { finishWork = resolve })
      let workStarted!: () => void
      const workIsRunning = new Promise<void>((resolve) => { workStarted = resolve })
      const committing = store.commit(owner, async (tx) => {
        workStarted()
        await workMayFinish
        return tenantWrite(newTenantId(), createdResponse('ord_slow'))(tx)
      })
      await workIsRunning
      await delay(PAST_SHORT_LEASE_MS)

      // The row is locked by the committing owner: the takeover and a renewal skip it.
      const view = await find()
      expect(view.leaseLive).toBe(false)
      expect(await store.takeOver(view, claimInput({ requestId: 'req_impatient' }))).toBeUndefined()
      expect(await store.renew(owner, LONG_LEASE_MS)).toBe(false)

      finishWork()
      expect((await committing).kind).toBe('committed')
      expect(await find()).toMatchObject({ status: 'succeeded', resourceId: 'ord_slow', attempts: 1 })
    })
  })

  // Needs a second connection while the owner's transaction is open.
  if (concurrentTransactions) {
    it('a duplicate\'s claim attempt is answered at once while the owner is about to commit, never made to wait for it', async () => {
      const owner = await claim()
      let duplicate: Claim | undefined | 'not tried' = 'not tried'
      // Were the INSERT to wait for the owner's transaction, this would never finish.
      const outcome = await store.commit(owner, tenantWrite(newTenantId(), createdResponse('ord_owner')), async () => {
        duplicate = await store.insert(claimInput({ requestId: 'req_duplicate' }))
        expect(await find()).toMatchObject({ status: 'processing', leaseToken: owner.leaseToken, responseStatus: null })
      })
      expect(duplicate).toBeUndefined()
      expect(outcome.kind).toBe('committed')
      expect(await find()).toMatchObject({ status: 'succeeded', resourceId: 'ord_owner', attempts: 1, requestId: 'req_first' })
    })
  }

  describe('renew', () => {
    it('extends the lease for the owner only', async () => {
      const owner = await claim({ leaseMs: 1_000 })
      const before = (await find()).leaseExpiresAt!.getTime()
      expect(await store.renew(owner, LONG_LEASE_MS)).toBe(true)
      const renewed = await find()
      expect(renewed.leaseExpiresAt!.getTime()).toBeGreaterThan(before)
      expect(renewed.leaseRemainingMs).toBeGreaterThan(LONG_LEASE_MS - 10_000)
      expect(renewed.leaseToken).toBe(owner.leaseToken)

      const stranger: Claim = { record: owner.record, leaseToken: randomUUID() }
      expect(await store.renew(stranger, LONG_LEASE_MS * 2)).toBe(false)
      expect((await find()).leaseExpiresAt!.getTime()).toBe(renewed.leaseExpiresAt!.getTime())
    })

    it('keeps an owner in charge past its original lease', async () => {
      const owner = await claim({ leaseMs: SHORT_LEASE_MS })
      expect(await store.renew(owner, LONG_LEASE_MS)).toBe(true)
      await delay(PAST_SHORT_LEASE_MS)
      const record = await find()
      expect(record.leaseLive).toBe(true)
      expect(canTakeOver(record, 'fingerprint-a')).toBe(false)
      expect(await store.takeOver(record, claimInput())).toBeUndefined()
    })

    it('returns false once the response is stored', async () => {
      const owner = await claim()
      await store.commit(owner, async () => createdResponse('ord_done'))
      expect(await store.renew(owner, LONG_LEASE_MS)).toBe(false)
      expect((await find()).leaseExpiresAt).toBeNull()
    })
  })

  describe('release', () => {
    it('ends the lease at once, stores the error, and allows an immediate takeover', async () => {
      const owner = await claim()
      await store.release(owner, 'database timeout')
      const released = await find()
      expect(released).toMatchObject({ status: 'processing', leaseToken: null, leaseLive: false, error: 'database timeout', responseStatus: null })
      expect(canTakeOver(released, 'fingerprint-a')).toBe(true)

      const retry = await store.takeOver(released, claimInput({ requestId: 'req_retry' }))
      expect(retry).toBeDefined()
      expect(retry!.record).toMatchObject({ attempts: 2, leaseToken: retry!.leaseToken })
      expect(await store.commit(owner, async () => createdResponse('ord_stale'))).toEqual({ kind: 'lease-lost' })
    })

    it('keeps at most 500 characters of the error', async () => {
      const owner = await claim()
      await store.release(owner, 'x'.repeat(2_000))
      expect((await find()).error).toBe('x'.repeat(500))
    })
  })
}

describeWithServices('idempotency store contract: Postgres', ['postgres'], () => {
  idempotencyStoreContract('postgres', true)
})

describe('idempotency store contract: PGlite', () => {
  idempotencyStoreContract('pglite', false)
})
