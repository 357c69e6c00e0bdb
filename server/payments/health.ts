import { desc, inArray, sql } from 'drizzle-orm'
import { useConfig } from '../config'
import type { Database } from '@idempotent-checkout/db-kit'
import { jobs } from '../db/schema'
import { paymentCancelJob, paymentCreateIntentJob, paymentRefundJob } from '../orders/job-types'

const providerCallKinds = [paymentCreateIntentJob.kind, paymentRefundJob.kind, paymentCancelJob.kind]

/**
 * Whether the configured provider is failing, from every instance's point of view: calls to it that
 * failed and wait for their retry, or that ran out of attempts while it did not answer (for
 * reconciliation to ask again) with no call answered since, and the latest error. Read from the
 * jobs table, so any instance answers for all.
 */
export async function providerHealth(db: Database) {
  const [row] = await db.select({
    waiting: sql<number>`count(*) filter (where ${jobs.status} = 'failed')::int`,
    deadLetters: sql<number>`count(*) filter (where ${jobs.status} = 'dead_letter')::int`,
    // A refusal dead-letters at once (permanent): the provider answered that one.
    gaveUpSinceAnswered: sql<boolean>`coalesce(
      max(${jobs.updatedAt}) filter (where ${jobs.status} = 'dead_letter' and ${jobs.errors} -> -1 ->> 'errorClass' <> 'permanent')
        > coalesce(max(${jobs.completedAt}) filter (where ${jobs.status} = 'completed'), '-infinity'), false)`,
  }).from(jobs).where(inArray(jobs.kind, providerCallKinds))
  const waiting = row?.waiting ?? 0
  const failing = waiting > 0 || row?.gaveUpSinceAnswered === true
  const [latest] = failing
    ? await db.select({ kind: jobs.kind, lastError: jobs.lastError, at: jobs.updatedAt }).from(jobs)
        .where(sql`${jobs.kind} in ${providerCallKinds} and ${jobs.status} in ('failed', 'dead_letter')`).orderBy(desc(jobs.updatedAt)).limit(1)
    : []
  return {
    provider: useConfig().PAYMENT_PROVIDER,
    failing,
    callsWaitingForRetry: waiting,
    callsOutOfAttempts: row?.deadLetters ?? 0,
    ...(latest && { lastError: { kind: latest.kind, error: latest.lastError, at: latest.at.toISOString() } }),
  }
}
