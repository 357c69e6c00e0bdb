import { randomUUID } from 'node:crypto'
import { eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import type { Database } from '@idempotent-checkout/db-kit'
import { describeDatabaseError } from '@idempotent-checkout/db-kit'
import { jobs, tenants } from '../../server/db/schema'
import { idempotencyRecords, createReplayCache, createMemoryLocks } from 'nuxt-idempotency/core'
import { type IdempotencyDeps, runIdempotent } from 'nuxt-idempotency/core'
import { defineJobKind } from '../../server/jobs/kind'
import { createWorker } from '../../server/jobs/worker'
import { setLogLevel } from '../../server/observability/logger'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { enqueueTestJob } from '../support/jobs'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'

// A real failing query on each driver, whose parameters hold a customer's email: what the job
// history and the idempotency record keep is its SQLSTATE and constraint, never the values.

const EMAIL = 'shopper.private@example.com'
const DUPLICATE_TENANT = 'database error 23505 unique_violation on tenants_pkey'

if (!process.env.LOG_LEVEL) setLogLevel('silent')

function errorTextContract(driver: DatabaseDriver) {
  let database: SuiteDatabase
  let db: Database
  const existingTenant = `ten_${randomUUID()}`

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'database_error_text')
    db = database.handle.db
    await db.insert(tenants).values({ id: existingTenant, name: 'exists' })
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  /** The same tenant id again, named with the email: a unique violation whose parameters hold it. */
  const insertDuplicate = (tx: Database) => tx.insert(tenants).values({ id: existingTenant, name: EMAIL })

  it('the driver\'s error is drizzle\'s, with the email in its message; described by SQLSTATE and constraint', async () => {
    const error = await insertDuplicate(db).then(() => undefined, (failure: unknown) => failure as Error)
    expect(error?.message).toContain(EMAIL)
    expect(describeDatabaseError(error)).toBe(DUPLICATE_TENANT)
    // The server's own message quotes the value too.
    const invalidInteger = await db.execute(sql`select ${EMAIL}::int`).then(() => undefined, (failure: unknown) => failure as Error & { cause: Error })
    expect(invalidInteger?.cause.message).toContain(EMAIL)
    expect(describeDatabaseError(invalidInteger)).toBe('database error 22P02 invalid_text_representation')
  })

  it('a job failing on a database error stores no parameters in jobs.last_error or jobs.errors', async () => {
    const failing = defineJobKind({
      kind: 'test.database_failure',
      payload: z.object({}),
      async run({ db: jobDb }) {
        await insertDuplicate(jobDb)
      },
    })
    const jobId = await enqueueTestJob(db, { kind: failing.kind, dedupeKey: randomUUID(), payload: {}, maxAttempts: 1 })
    const worker = createWorker({
      db,
      notifications: database.handle.notifications,
      locks: createMemoryLocks(),
      kinds: [failing],
      workerId: `error-text-${driver}`,
      concurrency: 1,
      prefetch: 8,
      pollIntervalMs: 20,
      claimCoalesceMs: 25,
      heartbeatTimeoutMs: 10_000,
      lockTtlMs: 10_000,
      lockBusyDelayMs: 20,
      backoff: { baseMs: 10, capMs: 10 },
      snooze: { max: 20, maxDelayMs: 60 * 60 * 1000 },
      faultsEnabled: false,
    })
    await worker.start()
    try {
      let row: { status: string, lastError: string | null, errors: Array<{ message: string, errorClass: string }> } | undefined
      await pollUntil('the job is dead-lettered', async () => {
        [row] = await db.select({ status: jobs.status, lastError: jobs.lastError, errors: jobs.errors }).from(jobs).where(eq(jobs.id, jobId!))
        return row?.status === 'dead_letter'
      }, { timeoutMs: 10_000, intervalMs: 20 })
      expect(row!.lastError).toBe(DUPLICATE_TENANT)
      expect(row!.errors.map(entry => [entry.errorClass, entry.message])).toEqual([['retryable', DUPLICATE_TENANT]])
      expect(JSON.stringify(row)).not.toContain(EMAIL)
    }
    finally {
      await worker.stop(100)
    }
  })

  it('a leased request failing on a database error stores no parameters in idempotency_records.error', async () => {
    const deps: IdempotencyDeps = {
      database: database.handle,
      locks: createMemoryLocks(),
      replays: createReplayCache({ maxBytes: 0 }),
      lockTtlMs: 10_000,
      leaseMs: 10_000,
    }
    const scope = `tenant:error_text_${randomUUID()}`
    const request = { scope, route: 'POST /api/tenants', key: 'key-1', fingerprint: 'fp', requestId: 'req_error_text', ttlSeconds: 3600, waitMs: 0 }
    const outcome = runIdempotent(deps, request, {
      mode: 'atomic',
      execute: async (tx) => {
        await insertDuplicate(tx)
        return { status: 201, body: {} }
      },
    })
    await expect(outcome).rejects.toThrow(EMAIL)
    const [record] = await db.select({ status: idempotencyRecords.status, error: idempotencyRecords.error }).from(idempotencyRecords)
      .where(eq(idempotencyRecords.scope, scope))
    expect(record).toEqual({ status: 'processing', error: DUPLICATE_TENANT })
  })
}

describe('database error text: PGlite', () => errorTextContract('pglite'))
describeWithServices('database error text: Postgres', ['postgres'], () => errorTextContract('postgres'))
