import { sql } from 'drizzle-orm'
import { bigint, bigserial, check, index, integer, json, jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core'

/**
 * The single source of truth for every table. Each uniqueness the product promises is a named
 * database constraint: the application checks are for nice errors, these are the fence.
 */

const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow()
const updatedAt = () => timestamp('updated_at', { withTimezone: true }).notNull().defaultNow()

export const tenants = pgTable('tenants', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  createdAt: createdAt(),
})

export const apiKeys = pgTable('api_keys', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull().references(() => tenants.id),
  /** SHA-256 of the secret key: the key itself is shown once and never stored. */
  keyHash: text('key_hash').notNull(),
  /** First characters of the key, to recognise it in listings. */
  keyPrefix: text('key_prefix').notNull(),
  createdAt: createdAt(),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
}, t => [unique('api_keys_key_hash_unique').on(t.keyHash)])

export const idempotencyStatuses = ['processing', 'succeeded', 'failed'] as const
export type IdempotencyStatus = typeof idempotencyStatuses[number]

export const idempotencyRecords = pgTable('idempotency_records', {
  id: uuid('id').primaryKey().defaultRandom(),
  /** `tenant:<id>` for orders, `webhook:<provider>` for webhooks. */
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
  index('idempotency_records_expires_at_idx').on(t.expiresAt),
  check('idempotency_records_status_check', sql`${t.status} in (${sql.raw(idempotencyStatuses.map(status => `'${status}'`).join(', '))})`),
])

export const orders = pgTable('orders', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull().references(() => tenants.id),
  cartId: text('cart_id').notNull(),
  status: text('status').notNull().default('pending_payment'),
  currency: text('currency').notNull(),
  amount: bigint('amount', { mode: 'number' }).notNull(),
  paymentMethod: text('payment_method').notNull(),
  items: jsonb('items').$type<Array<{ sku: string, quantity: number, unitPrice: number }>>().notNull(),
  customer: jsonb('customer').$type<{ email: string }>().notNull(),
  idempotencyKey: text('idempotency_key'),
  requestId: text('request_id').notNull(),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, t => [unique('orders_tenant_cart_unique').on(t.tenantId, t.cartId)])

/** One row per API request: what the evidence locker reads to tell a duplicate's story. */
export const requestLog = pgTable('request_log', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  requestId: text('request_id').notNull(),
  method: text('method').notNull(),
  path: text('path').notNull(),
  tenantId: text('tenant_id'),
  scope: text('scope'),
  idempotencyKey: text('idempotency_key'),
  /** miss | replay | conflict | in_progress | missing_key | invalid | error, or null off idempotent routes. */
  outcome: text('outcome'),
  /** The status sent, or 499 when the connection closed first (the client never heard). */
  status: integer('status').notNull(),
  durationMs: integer('duration_ms').notNull(),
  instance: text('instance').notNull(),
  createdAt: createdAt(),
}, t => [
  index('request_log_key_idx').on(t.scope, t.idempotencyKey),
  index('request_log_request_id_idx').on(t.requestId),
  index('request_log_created_at_idx').on(t.createdAt),
])
