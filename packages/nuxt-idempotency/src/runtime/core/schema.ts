import { sql } from 'drizzle-orm'
import { check, index, integer, json, jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core'
import { type IdempotencyStatus, idempotencyStatuses } from './statuses'

/**
 * The module's one table. An app that keeps its own drizzle schema imports it from there (so that
 * drizzle-kit sees it and never generates a DROP); the module's migrations create it when absent.
 */

const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow()
const updatedAt = () => timestamp('updated_at', { withTimezone: true }).notNull().defaultNow()

export const idempotencyRecords = pgTable('idempotency_records', {
  id: uuid('id').primaryKey().defaultRandom(),
  /** `tenant:<id>` for orders, `provider:<name>` for webhooks. */
  scope: text('scope').notNull(),
  key: text('key').notNull(),
  /** `POST /api/orders`: part of the fingerprint, kept for the 422 detail and for operators. */
  route: text('route').notNull(),
  fingerprint: text('fingerprint').notNull(),
  /**
   * processing: claimed, result not stored (an owner holds the lease, or its lease ran out or was
   * released after an unexpected failure, so the next retry may take over). succeeded/failed: the
   * response is stored and replayed; failed marks a deterministic business failure (4xx).
   */
  status: text('status').$type<IdempotencyStatus>().notNull(),
  leaseToken: uuid('lease_token'),
  leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
  attempts: integer('attempts').notNull().default(1),
  requestId: text('request_id').notNull(),
  responseStatus: integer('response_status'),
  // json, not jsonb: the replay must be byte-for-byte the first response, key order included.
  responseBody: json('response_body').$type<Record<string, unknown>>(),
  responseHeaders: jsonb('response_headers').$type<Record<string, string>>(),
  resourceType: text('resource_type'),
  resourceId: text('resource_id'),
  /** Why the last attempt failed (unexpected errors) or which problem was stored (4xx). */
  error: text('error'),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
}, t => [
  unique('idempotency_records_scope_key_unique').on(t.scope, t.key),
  // The retention's deletes, oldest first. Lookups use the (scope, key) constraint's index.
  index('idempotency_records_expires_at_idx').on(t.expiresAt),
  check('idempotency_records_status_check', sql`${t.status} in (${sql.raw(idempotencyStatuses.map(status => `'${status}'`).join(', '))})`),
])
