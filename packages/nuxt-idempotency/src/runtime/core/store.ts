import { and, eq, getTableColumns, inArray, isNull, lt, or, sql } from 'drizzle-orm'
import type { BoundStatement, Database } from '@idempotent-checkout/db-kit'
import { idempotencyRecords as records } from './schema'
import { defineStatement, transaction, deletePickedRows } from '@idempotent-checkout/db-kit'

/**
 * Postgres is the source of truth for idempotency; the unique (scope, key) decides who executes.
 * Atomic operations insert their record already finished, in the transaction of their business
 * writes (`finishedRecordInsert`). Leased operations claim a record with a lease token; the owner's
 * business writes and its stored response commit in one transaction that first re-checks (and
 * row-locks) that token, so an owner whose lease was taken over can never store a result.
 * All time comparisons use the database clock, never an instance's.
 */

/** The constraint an insert of an existing (scope, key) violates. */
export const RECORD_KEY_CONSTRAINT = 'idempotency_records_scope_key_unique'

export type IdempotencyRecord = typeof records.$inferSelect
export type RecordView = IdempotencyRecord & {
  /** Someone holds an unexpired lease. */
  leaseLive: boolean
  /** Past expires_at: treated as if it did not exist. */
  expired: boolean
  leaseRemainingMs: number
}

export interface ClaimInput {
  scope: string
  key: string
  route: string
  fingerprint: string
  requestId: string
  leaseMs: number
  ttlSeconds: number
}

export interface Claim { record: IdempotencyRecord, leaseToken: string }

export interface StoredResponse {
  status: number
  body: Record<string, unknown>
  headers?: Record<string, string>
  resourceType?: string
  resourceId?: string
  /** Problem slug of a stored deterministic failure. */
  error?: string
}

export type CommitOutcome = { kind: 'committed', response: StoredResponse } | { kind: 'lease-lost' }

class LeaseLost extends Error {}

const inMs = (ms: number) => sql`now() + (${ms}::int * interval '1 millisecond')`
const inSeconds = (seconds: number) => sql`now() + (${seconds}::int * interval '1 second')`

const viewColumns = {
  ...getTableColumns(records),
  leaseLive: sql<boolean>`coalesce(${records.leaseExpiresAt} > now(), false)`.mapWith(Boolean),
  expired: sql<boolean>`${records.expiresAt} <= now()`.mapWith(Boolean),
  leaseRemainingMs: sql<number>`greatest(0, coalesce(extract(epoch from ${records.leaseExpiresAt} - now()) * 1000, 0))::int`.mapWith(Number),
}

/** Whether `claimant` may take the record over: it expired, or its owner's lease ran out. */
export function canTakeOver(record: RecordView, fingerprint: string): boolean {
  const running = record.status === 'processing' && record.leaseLive
  if (record.expired) return !running
  return record.status === 'processing' && !record.leaseLive && record.fingerprint === fingerprint
}

export interface FinishedRecordInput {
  scope: string
  key: string
  route: string
  fingerprint: string
  requestId: string
  ttlSeconds: number
  response: StoredResponse
  /** created_at and updated_at: the time of the transaction's business rows. */
  now: Date
}

/**
 * An atomic record's expires_at: now + ttl by the same clock as its created_at, so the caller knows
 * the stored value without reading it back (the shared replay cache carries it).
 */
export const finishedRecordExpiry = (input: Pick<FinishedRecordInput, 'now' | 'ttlSeconds'>): Date => new Date(input.now.getTime() + input.ttlSeconds * 1000)

const insertFinished = defineStatement(db => db.insert(records).values({
  scope: sql.placeholder('scope'),
  key: sql.placeholder('key'),
  route: sql.placeholder('route'),
  fingerprint: sql.placeholder('fingerprint'),
  status: sql.placeholder('status'),
  requestId: sql.placeholder('requestId'),
  responseStatus: sql.placeholder('responseStatus'),
  responseBody: sql.placeholder('responseBody'),
  responseHeaders: sql.placeholder('responseHeaders'),
  resourceType: sql.placeholder('resourceType'),
  resourceId: sql.placeholder('resourceId'),
  error: sql.placeholder('error'),
  createdAt: sql.placeholder('now'),
  updatedAt: sql.placeholder('now'),
  expiresAt: sql.placeholder('expiresAt'),
}))

/**
 * The record of an atomic execution, inserted in its final state with the stored response. Sent
 * first in the business transaction: an existing (scope, key) fails it with a unique violation
 * (after waiting for that record's own transaction, if it is still open) before any business write.
 */
export function finishedRecordInsert(db: Database, input: FinishedRecordInput): BoundStatement {
  const { status, responseStatus, responseBody, responseHeaders, resourceType, resourceId, error } = finalFields(input.response)
  return insertFinished(db, {
    scope: input.scope, key: input.key, route: input.route, fingerprint: input.fingerprint, requestId: input.requestId,
    expiresAt: finishedRecordExpiry(input), now: input.now, status, responseStatus, responseBody, responseHeaders, resourceType, resourceId, error,
  })
}

/** canTakeOver, re-checked by the database at the moment of the write. */
function stillTakeable(existing: RecordView, fingerprint: string) {
  const leaseRanOut = or(isNull(records.leaseExpiresAt), lt(records.leaseExpiresAt, sql`now()`))
  return existing.expired
    ? and(sql`${records.expiresAt} <= now()`, or(sql`${records.status} <> 'processing'`, leaseRanOut))
    : and(eq(records.status, 'processing'), leaseRanOut, eq(records.fingerprint, fingerprint))
}

export function createIdempotencyStore(db: Database) {
  const owned = (id: string, leaseToken: string) =>
    and(eq(records.id, id), eq(records.leaseToken, leaseToken), eq(records.status, 'processing'))

  return {
    async find(scope: string, key: string): Promise<RecordView | undefined> {
      const [row] = await db.select(viewColumns).from(records)
        .where(and(eq(records.scope, scope), eq(records.key, key)))
      return row
    },

    /** Inserts a fresh record; undefined when the (scope, key) already exists. */
    async insert(input: ClaimInput): Promise<Claim | undefined> {
      const leaseToken = crypto.randomUUID()
      const [record] = await db.insert(records).values({
        scope: input.scope,
        key: input.key,
        route: input.route,
        fingerprint: input.fingerprint,
        status: 'processing',
        leaseToken,
        leaseExpiresAt: inMs(input.leaseMs),
        requestId: input.requestId,
        expiresAt: inSeconds(input.ttlSeconds),
      }).onConflictDoNothing({ target: [records.scope, records.key] }).returning()
      return record && { record, leaseToken }
    },

    /**
     * Takes over an abandoned claim (same request, lease ran out) or reuses an expired record as new.
     * The conditions are re-checked under a row lock that skips a row someone is committing, so at
     * most one claimant wins and a committing owner is never overtaken.
     */
    async takeOver(existing: RecordView, input: ClaimInput): Promise<Claim | undefined> {
      const leaseToken = crypto.randomUUID()
      const lockable = db.select({ id: records.id }).from(records)
        .where(and(eq(records.id, existing.id), stillTakeable(existing, input.fingerprint)))
        .for('update', { skipLocked: true })
      const fresh = existing.expired
        ? {
            route: input.route, fingerprint: input.fingerprint, requestId: input.requestId, attempts: 1,
            responseStatus: null, responseBody: null, responseHeaders: null, resourceType: null, resourceId: null,
            error: null, createdAt: sql`now()`,
          }
        : { attempts: sql`${records.attempts} + 1` }
      // The TTL restarts with each execution, so a result stored just before the old expiry still replays.
      const [record] = await db.update(records)
        .set({ ...fresh, status: 'processing', leaseToken, leaseExpiresAt: inMs(input.leaseMs), expiresAt: inSeconds(input.ttlSeconds), updatedAt: sql`now()` })
        .where(inArray(records.id, lockable))
        .returning()
      return record && { record, leaseToken }
    },

    /**
     * Runs `work` and stores its response in one transaction, fenced by the lease token: the row
     * is locked first, so nobody can take the claim over while the owner commits. `persist`: what
     * the record keeps of the response (encrypted, say); undefined from it deletes the record in
     * that transaction instead (the work's writes still commit, the key is free again).
     */
    async commit(
      claim: Claim,
      work: (tx: Database) => Promise<StoredResponse>,
      beforeCommit?: () => Promise<void>,
      persist?: (response: StoredResponse) => StoredResponse | undefined,
    ): Promise<CommitOutcome> {
      let stored: Promise<unknown> | undefined
      const outcome = await transaction(db, async (tx) => {
        // The fence is sent together with the business statements (one round trip, not two) and is
        // the first of them that Postgres runs; without the token the whole transaction rolls back.
        const fence = tx.select({ id: records.id }).from(records)
          .where(owned(claim.record.id, claim.leaseToken)).for('update').execute()
        const response = await work(tx as Database).catch(async (error: unknown) => {
          // A failure of an owner that was fenced out is that, not the work's own failure.
          const fenced = await fence.then(([holder]) => !holder, () => false)
          throw fenced ? new LeaseLost() : error
        })
        const [holder] = await fence
        if (!holder) throw new LeaseLost()
        await beforeCommit?.()
        // Last, right before COMMIT: until then the row is only locked, so a duplicate's claim
        // attempt (INSERT … ON CONFLICT) sees the record at once instead of waiting on this update.
        // Not awaited here, so that it travels with the COMMIT in one round trip; should it fail,
        // Postgres turns that COMMIT into a ROLLBACK, and `stored` rejects below.
        const kept = persist ? persist(response) : response
        stored = kept
          ? tx.update(records).set(finalFields(kept)).where(eq(records.id, claim.record.id)).execute()
          : tx.delete(records).where(eq(records.id, claim.record.id)).execute()
        stored.catch(() => {})
        return { kind: 'committed' as const, response }
      }).catch((error: unknown) => {
        if (error instanceof LeaseLost) return { kind: 'lease-lost' as const }
        throw error
      })
      if (outcome.kind === 'committed') await stored
      return outcome
    },

    /**
     * Stores a response on its own, fenced like commit: a leased owner's result (its work ran with no
     * transaction open), or a deterministic failure whose business writes were rolled back.
     */
    async storeFenced(claim: Claim, response: StoredResponse): Promise<boolean> {
      const rows = await db.update(records).set(finalFields(response))
        .where(owned(claim.record.id, claim.leaseToken)).returning({ id: records.id })
      return rows.length === 1
    },

    /** Deletes an owner's claim instead of storing its response (not to be kept): the key is free again. */
    async discard(claim: Claim): Promise<boolean> {
      const rows = await db.delete(records).where(owned(claim.record.id, claim.leaseToken)).returning({ id: records.id })
      return rows.length === 1
    },

    /** Extends the lease while the owner works; a row being committed is skipped, not waited for. */
    async renew(claim: Claim, leaseMs: number): Promise<boolean> {
      const lockable = db.select({ id: records.id }).from(records)
        .where(owned(claim.record.id, claim.leaseToken)).for('update', { skipLocked: true })
      const rows = await db.update(records).set({ leaseExpiresAt: inMs(leaseMs) })
        .where(inArray(records.id, lockable)).returning({ id: records.id })
      return rows.length === 1
    },

    /** Ends the lease now after an unexpected failure, so the client's retry re-executes at once. */
    async release(claim: Claim, error: string): Promise<void> {
      await db.update(records)
        .set({ leaseToken: null, leaseExpiresAt: sql`now()`, error: error.slice(0, 500), updatedAt: sql`now()` })
        .where(owned(claim.record.id, claim.leaseToken))
    },

    /**
     * Deletes a record that may be executed anew (it expired, or it is an abandoned claim of the
     * same request), if it still may: an atomic execution then inserts the key again.
     */
    async deleteStale(existing: RecordView, fingerprint: string): Promise<void> {
      await db.delete(records).where(and(eq(records.id, existing.id), stillTakeable(existing, fingerprint)))
    },

    /**
     * Retention: deletes up to `batch` expired records, oldest expiry first (which keeps the plan on
     * the expires_at index), never one whose owner still holds a live lease; rows another
     * transaction holds are skipped. Returns how many.
     */
    deleteExpired(batch: number): Promise<number> {
      const expired = db.select({ id: records.id }).from(records)
        .where(and(
          lt(records.expiresAt, sql`now()`),
          or(isNull(records.leaseExpiresAt), lt(records.leaseExpiresAt, sql`now()`)),
        ))
        .orderBy(records.expiresAt)
        .limit(batch)
        .for('update', { skipLocked: true })
      return deletePickedRows(db, records, records.id, expired)
    },
  }
}

export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>

function finalFields(response: StoredResponse) {
  return {
    status: response.status >= 400 ? 'failed' as const : 'succeeded' as const,
    responseStatus: response.status,
    responseBody: response.body,
    responseHeaders: response.headers ?? {},
    resourceType: response.resourceType ?? null,
    resourceId: response.resourceId ?? null,
    error: response.error ?? null,
    leaseToken: null,
    leaseExpiresAt: null,
    updatedAt: sql`now()`,
  }
}
