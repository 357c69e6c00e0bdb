import { and, eq, type SQL } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { type IdempotencyStatus, mailbox } from '../db/schema'
import { idempotencyRecords } from 'nuxt-idempotency/core'
import { newestFirst } from './list'

/** The operator listings behind the ops console: idempotency records and the dev mailbox, newest first. */

export interface RecordFilter {
  /** A tenant id: its records are those of scope `tenant:<id>`. */
  tenant?: string
  /** Any scope, e.g. `provider:standard`. */
  scope?: string
  status?: IdempotencyStatus
  key?: string
  limit: number
}

/** What an operator sees of a record: never its lease token or stored response body. */
const recordColumns = {
  id: idempotencyRecords.id,
  scope: idempotencyRecords.scope,
  key: idempotencyRecords.key,
  route: idempotencyRecords.route,
  status: idempotencyRecords.status,
  attempts: idempotencyRecords.attempts,
  requestId: idempotencyRecords.requestId,
  responseStatus: idempotencyRecords.responseStatus,
  resourceType: idempotencyRecords.resourceType,
  resourceId: idempotencyRecords.resourceId,
  error: idempotencyRecords.error,
  createdAt: idempotencyRecords.createdAt,
  updatedAt: idempotencyRecords.updatedAt,
  expiresAt: idempotencyRecords.expiresAt,
  leaseExpiresAt: idempotencyRecords.leaseExpiresAt,
}

export async function listIdempotencyRecords(db: Database, filter: RecordFilter) {
  const conditions: SQL[] = []
  if (filter.tenant !== undefined) conditions.push(eq(idempotencyRecords.scope, `tenant:${filter.tenant}`))
  if (filter.scope !== undefined) conditions.push(eq(idempotencyRecords.scope, filter.scope))
  if (filter.status !== undefined) conditions.push(eq(idempotencyRecords.status, filter.status))
  if (filter.key !== undefined) conditions.push(eq(idempotencyRecords.key, filter.key))
  return db.select(recordColumns).from(idempotencyRecords).where(and(...conditions))
    .orderBy(...newestFirst(idempotencyRecords))
    .limit(filter.limit)
}

export async function listMailbox(db: Database, filter: { orderId?: string, limit: number }) {
  return db.select().from(mailbox).where(filter.orderId === undefined ? undefined : eq(mailbox.orderId, filter.orderId))
    .orderBy(...newestFirst(mailbox))
    .limit(filter.limit)
}
