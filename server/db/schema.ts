import { sql } from 'drizzle-orm'
import { bigint, bigserial, boolean, check, index, integer, jsonb, pgSequence, pgTable, primaryKey, text, timestamp, unique, uniqueIndex } from 'drizzle-orm/pg-core'
import type { PaymentNextAction } from '../../shared/orders'
import {
  type IdempotencyStatus, idempotencyStatuses, type JobStatus, jobStatuses, type LedgerDiscrepancyKind, ledgerDiscrepancyKinds, type LedgerDiscrepancyStatus,
  ledgerDiscrepancyStatuses, type RefundSource, refundSources, type RefundStatus, refundStatuses, type WebhookEventSource, webhookEventSources,
  type WebhookEventStatus, webhookEventStatuses, type CancelReason, cancelReasons, stockMovementKinds, type StockMovementKind, stockSourceTypes, type StockSourceType,
  type EventType, eventTypes, type WebhookEndpointStatus, webhookEndpointStatuses,
} from '../../shared/statuses'
import type { LedgerView, OpsJobError } from '../../shared/ops-api'

// The idempotency module's table (idempotencyRecords, from nuxt-idempotency/core) is not in this
// schema: its own migrations own it, and drizzle-kit generate (which ignores tablesFilter) would
// otherwise alter it. The app's indexes on it are in drizzle/0019_records_app_indexes.sql.

export { idempotencyStatuses, jobStatuses, webhookEventSources, webhookEventStatuses }
export type { IdempotencyStatus, JobStatus, WebhookEventSource, WebhookEventStatus }

/**
 * The single source of truth for every table. Each uniqueness the product promises is a named
 * database constraint: the application checks are for nice errors, these are the fence.
 */

export type { PaymentNextAction }

export interface PaymentError {
  /** The provider's code: card_declined, amount_too_large, deny, 400… */
  code: string
  /** For the shopper: what happened and what to do. */
  message: string
  /** For the shop: the provider's own words. */
  providerMessage: string
}

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
  /** Refreshed at most once per key-cache period per instance: authentication must not write per request. */
  lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
}, t => [
  unique('api_keys_key_hash_unique').on(t.keyHash),
  index('api_keys_tenant_idx').on(t.tenantId),
])

/**
 * What an operator did through the ops API (a tenant created, a key issued or revoked): kept as
 * evidence next to the request that did it. Never holds a secret.
 */
export const operatorActions = pgTable('operator_actions', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  /** tenant.created | api_key.created | api_key.revoked | job.dismissed | refund.created | ledger_discrepancy.resolved | event.resent */
  action: text('action').notNull(),
  /** Null for an action on no tenant's row: a dismissed job of no order. */
  tenantId: text('tenant_id'),
  /** The object acted on: the key id for key actions, the tenant id for tenant.created, the job id for job.dismissed. */
  subjectId: text('subject_id').notNull(),
  requestId: text('request_id'),
  detail: jsonb('detail').$type<Record<string, unknown>>().notNull().default({}),
  createdAt: createdAt(),
}, t => [
  index('operator_actions_tenant_idx').on(t.tenantId),
  index('operator_actions_subject_idx').on(t.subjectId),
  index('operator_actions_request_id_idx').on(t.requestId),
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
  /** The provider's payment (Stripe PaymentIntent id, Midtrans order id, mockpay intent), stored by the payment.create_intent job (fenced). */
  paymentIntentId: text('payment_intent_id'),
  /** Which provider holds the payment: mockpay | stripe | midtrans (set with paymentIntentId or paymentError). */
  paymentProvider: text('payment_provider'),
  /** What the checkout page does next: the Stripe client secret, the Midtrans virtual account or e-wallet actions. */
  paymentNextAction: jsonb('payment_next_action').$type<PaymentNextAction>(),
  /** The provider refused the payment for good (a decline, invalid details): why, for the shopper and for the shop. */
  paymentError: jsonb('payment_error').$type<PaymentError>(),
  /** When reconciliation last asked the provider about this order: each run asks about the longest unchecked first. */
  paymentCheckedAt: timestamp('payment_checked_at', { withTimezone: true }),
  /** The checkout page's session that placed the order (null for a tenant key): only it may cancel the order from the page. */
  checkoutSessionId: text('checkout_session_id'),
  /** Set with status canceled: `requested` (the API, the page, an operator) or `expired` (unpaid past ORDER_PAYMENT_TTL_SECONDS). */
  cancelReason: text('cancel_reason').$type<CancelReason>(),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, t => [
  // Each index is an entry written per order: each names the query that needs it. The duplicates
  // audit (server/ops/audit.ts) has none of its own: it groups every order by cart anyway.
  // One order per cart (planOrder's CART_CONSTRAINT), and the order a repeated cart already has.
  unique('orders_tenant_cart_unique').on(t.tenantId, t.cartId),
  check('orders_cancel_reason_check', sql`${t.cancelReason} in (${sql.raw(cancelReasons.map(reason => `'${reason}'`).join(', '))})`),
  // The expiry task reads the unpaid orders, oldest first.
  index('orders_unpaid_idx').on(t.createdAt).where(sql`${t.status} in ('pending_payment', 'payment_failed')`),
  // GET /api/orders: a tenant's orders newest first, keyset-paged by (created_at, id).
  index('orders_tenant_created_idx').on(t.tenantId, t.createdAt, t.id),
  // Reconciliation reads the orders left awaiting payment, oldest change first.
  index('orders_awaiting_payment_idx').on(t.updatedAt).where(sql`${t.status} = 'pending_payment' and ${t.paymentIntentId} is not null`),
  // A provider event that names only the payment (a refund made in Stripe's dashboard) finds its order.
  index('orders_payment_intent_idx').on(t.paymentIntentId).where(sql`${t.paymentIntentId} is not null`),
])

/**
 * A refund of (part of) an order's payment, in the order's units. Every refund that has not failed
 * holds its amount against the order's: a new one is admitted under the order's row lock only if the
 * holds, with it, stay within the amount paid. The provider is asked once per refund, under the key
 * `refund:<id>`; its answer, webhook or reconciliation settles the row (pending → succeeded | failed).
 */
export const refunds = pgTable('refunds', {
  id: text('id').primaryKey(),
  orderId: text('order_id').notNull().references(() => orders.id),
  tenantId: text('tenant_id').notNull(),
  amount: bigint('amount', { mode: 'number' }).notNull(),
  currency: text('currency').notNull(),
  status: text('status').$type<RefundStatus>().notNull(),
  /** requested_by_customer | duplicate | fraudulent | order_canceled (automatic), or null. */
  reason: text('reason'),
  source: text('source').$type<RefundSource>().notNull(),
  /** The provider's id for it (Stripe re_…, Midtrans refund id), once known. */
  providerRefundId: text('provider_refund_id'),
  /** Why the provider refused it (status failed), in the provider's words. */
  failure: text('failure'),
  idempotencyKey: text('idempotency_key'),
  requestId: text('request_id'),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
  settledAt: timestamp('settled_at', { withTimezone: true }),
}, t => [
  index('refunds_order_idx').on(t.orderId, t.createdAt),
  // The ledger check finds the orders whose refunds moved lately.
  index('refunds_updated_at_idx').on(t.updatedAt),
  unique('refunds_provider_refund_unique').on(t.orderId, t.providerRefundId),
  // A payment that arrives for a canceled order is given back once, however often it is applied.
  uniqueIndex('refunds_automatic_unique').on(t.orderId).where(sql`${t.source} = 'automatic'`),
  check('refunds_amount_positive', sql`${t.amount} > 0`),
  check('refunds_status_check', sql`${t.status} in (${sql.raw(refundStatuses.map(status => `'${status}'`).join(', '))})`),
  check('refunds_source_check', sql`${t.source} in (${sql.raw(refundSources.map(source => `'${source}'`).join(', '))})`),
])

/**
 * What the ledger check found differing between an order's ledger and its provider's and could not
 * heal (server/ledger): both ledgers as they were last seen, until a later check finds them agreeing
 * or an operator resolves it. One open row per (order, kind), however often and on however many
 * instances the check runs: a partial unique index, the fence the check's upsert relies on.
 */
export const ledgerDiscrepancies = pgTable('ledger_discrepancies', {
  id: text('id').primaryKey(),
  kind: text('kind').$type<LedgerDiscrepancyKind>().notNull(),
  orderId: text('order_id').notNull().references(() => orders.id),
  tenantId: text('tenant_id').notNull(),
  provider: text('provider').notNull(),
  status: text('status').$type<LedgerDiscrepancyStatus>().notNull().default('open'),
  summary: text('summary').notNull(),
  ours: jsonb('ours').$type<LedgerView>().notNull(),
  theirs: jsonb('theirs').$type<LedgerView>().notNull(),
  resolution: text('resolution'),
  /** The operator who resolved it; null when a later check found the ledgers agreeing. */
  resolvedBy: text('resolved_by'),
  createdAt: createdAt(),
  lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  resolvedAt: timestamp('resolved_at', { withTimezone: true }),
  updatedAt: updatedAt(),
}, t => [
  uniqueIndex('ledger_discrepancies_open_unique').on(t.orderId, t.kind).where(sql`${t.status} = 'open'`),
  index('ledger_discrepancies_order_idx').on(t.orderId),
  index('ledger_discrepancies_status_idx').on(t.status, t.createdAt),
  check('ledger_discrepancies_kind_check', sql`${t.kind} in (${sql.raw(ledgerDiscrepancyKinds.map(kind => `'${kind}'`).join(', '))})`),
  check('ledger_discrepancies_status_check', sql`${t.status} in (${sql.raw(ledgerDiscrepancyStatuses.map(status => `'${status}'`).join(', '))})`),
])

/** When the ledger check last compared an order with its provider's ledger: each run takes the longest unchecked first, never checked before all. */
export const ledgerChecks = pgTable('ledger_checks', {
  orderId: text('order_id').primaryKey().references(() => orders.id),
  checkedAt: timestamp('checked_at', { withTimezone: true }).notNull().defaultNow(),
}, t => [index('ledger_checks_checked_at_idx').on(t.checkedAt)])

/** One row per API request (repeated replays are counted in requestLogReplays): what the evidence locker reads to tell a duplicate's story. */
export const requestLog = pgTable('request_log', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  /** The server's own id for the request (`req_…`), never one a client chose. */
  requestId: text('request_id').notNull(),
  /** The client's X-Request-Id, when it sent a valid one: its correlation id, not proof of anything. */
  clientRequestId: text('client_request_id'),
  /**
   * How the request proved who sent it: tenant_key | checkout_session | ops_token | webhook_signature;
   * null when it did not (the evidence shows such rows as unverified).
   */
  authenticatedBy: text('authenticated_by'),
  method: text('method').notNull(),
  path: text('path').notNull(),
  tenantId: text('tenant_id'),
  scope: text('scope'),
  idempotencyKey: text('idempotency_key'),
  /** miss | replay | conflict | in_progress | missing_key | invalid | signature_invalid | error, or null off idempotent routes. */
  outcome: text('outcome'),
  /** The status sent, or 499 when the connection closed first (the client never heard). */
  status: integer('status').notNull(),
  durationMs: integer('duration_ms').notNull(),
  instance: text('instance').notNull(),
  createdAt: createdAt(),
}, t => [
  // Every index is paid on each row written, and most rows carry no key or client id: those two are
  // partial. A key is all but unique, so evidence by (scope, key), by key alone and by event id
  // across providers all read this one and filter the scope.
  index('request_log_idempotency_key_idx').on(t.idempotencyKey).where(sql`${t.idempotencyKey} is not null`),
  // Evidence by request id, and a retried batch's check for rows already written (insertBatch).
  index('request_log_request_id_idx').on(t.requestId),
  // Evidence by the client's X-Request-Id.
  index('request_log_client_request_id_idx').on(t.clientRequestId).where(sql`${t.clientRequestId} is not null`),
  // A btree, not BRIN: retention's batched delete stays an index scan of the oldest rows, and the
  // pages it frees are refilled with new rows, which would widen BRIN's ranges.
  index('request_log_created_at_idx').on(t.createdAt),
])

/** One entry of a job's error history, stored as the ops API shows it. */
export type JobErrorEntry = OpsJobError

/** Every claim draws the next value: a fence token that only grows, across all workers. */
export const jobFenceSequence = pgSequence('job_fence_seq')

/**
 * Replays counted instead of logged row by row: a key replayed again in the same minute on the same
 * instance (its first replay of the minute has its request_log row) adds one here. A client looping
 * on one key costs a row per instance and minute, not one per request. `replays` is the instance's
 * running total for the minute, so writing it again after a failed write that did commit changes
 * nothing (the upsert keeps the larger).
 */
export const requestLogReplays = pgTable('request_log_replays', {
  idempotencyKey: text('idempotency_key').notNull(),
  scope: text('scope').notNull(),
  /** The minute the replays fell in (its start). */
  minute: timestamp('minute', { withTimezone: true }).notNull(),
  instance: text('instance').notNull(),
  tenantId: text('tenant_id'),
  method: text('method').notNull(),
  path: text('path').notNull(),
  /** The status replayed (the stored response's): one per key. */
  status: integer('status').notNull(),
  replays: integer('replays').notNull(),
  firstAt: timestamp('first_at', { withTimezone: true }).notNull(),
  lastAt: timestamp('last_at', { withTimezone: true }).notNull(),
}, t => [
  // Key first: the evidence finds a key's counts by (scope, key) and by key alone (an event id in any provider).
  primaryKey({ name: 'request_log_replays_pkey', columns: [t.idempotencyKey, t.scope, t.minute, t.instance] }),
  // Retention deletes the oldest minutes.
  index('request_log_replays_minute_idx').on(t.minute),
])

/** The outbox: a job row commits in the same transaction as the business write that wants it. */
export const jobs = pgTable('jobs', {
  id: text('id').primaryKey(),
  kind: text('kind').notNull(),
  /** Same (kind, dedupe key) is never enqueued twice, e.g. one confirmation per order. */
  dedupeKey: text('dedupe_key').notNull(),
  payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
  status: text('status').$type<JobStatus>().notNull().default('queued'),
  /** Attempts started (a claim counts one; a lock-busy put-back or a graceful release gives it back). */
  attempt: integer('attempt').notNull().default(0),
  maxAttempts: integer('max_attempts').notNull(),
  /** Times the job asked to run later without spending an attempt (SnoozeJob); bounded by JOB_MAX_SNOOZES. */
  snoozes: integer('snoozes').notNull().default(0),
  runAt: timestamp('run_at', { withTimezone: true }).notNull().defaultNow(),
  lastError: text('last_error'),
  errors: jsonb('errors').$type<JobErrorEntry[]>().notNull().default([]),
  /** The business resource the job touches (`order:ord_…`): its lock key is `lock:<resource>`. */
  resourceId: text('resource_id'),
  idempotencyKey: text('idempotency_key'),
  requestId: text('request_id'),
  lockedBy: text('locked_by'),
  /** The current claim's fence token: completion, heartbeats and business writes must present it. */
  fence: bigint('fence', { mode: 'number' }),
  /** Test-only faults (stall, fail, snooze) honoured when FAULTS_ENABLED=true. */
  faults: jsonb('faults').$type<Record<string, unknown>>(),
  startedAt: timestamp('started_at', { withTimezone: true }),
  heartbeatAt: timestamp('heartbeat_at', { withTimezone: true }),
  completedAt: timestamp('completed_at', { withTimezone: true }),
  /** Why an operator dismissed the dead letter, and when (status dismissed). */
  dismissedReason: text('dismissed_reason'),
  dismissedAt: timestamp('dismissed_at', { withTimezone: true }),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, t => [
  // Each index is an entry written per job: each names the query that needs it. A new job is queued,
  // so it lands in the first two and the last; the partial ones take it when its status gets there.
  // Enqueue's ON CONFLICT (kind, dedupe_key), and every lookup of a kind's job by its dedupe key
  // (an order's payment.create_intent, an event's deliveries); kind first, so `kind in (…)` reads it too.
  unique('jobs_kind_dedupe_key_unique').on(t.kind, t.dedupeKey),
  // The worker's claim: due jobs by run_at.
  index('jobs_ready_idx').on(t.runAt).where(sql`${t.status} in ('queued', 'failed')`),
  // The rescuer: running jobs whose heartbeat stopped.
  index('jobs_running_heartbeat_idx').on(t.heartbeatAt).where(sql`${t.status} = 'running'`),
  // Retention picks completed jobs oldest first: without it every batch scans the table for old rows.
  index('jobs_completed_at_idx').on(t.completedAt).where(sql`${t.status} = 'completed'`),
  // GET /api/ops/jobs?status=dead_letter, newest first: what operators redrive or dismiss.
  index('jobs_dead_letter_idx').on(t.createdAt).where(sql`${t.status} = 'dead_letter'`),
  // An order's jobs: the evidence locker's timeline and the ops jobs listing filtered by resource.
  index('jobs_resource_idx').on(t.resourceId),
  check('jobs_status_check', sql`${t.status} in (${sql.raw(jobStatuses.map(status => `'${status}'`).join(', '))})`),
])

/**
 * The simulated provider's (mockpay's) own ledger — a real provider keeps this on its side: one
 * intent per idempotency token, however often it is asked.
 */
export const paymentIntents = pgTable('payment_intents', {
  id: text('id').primaryKey(),
  provider: text('provider').notNull(),
  idempotencyToken: text('idempotency_token').notNull(),
  orderId: text('order_id').notNull(),
  amount: bigint('amount', { mode: 'number' }).notNull(),
  currency: text('currency').notNull(),
  /** requires_payment → succeeded | failed (a failed intent may be confirmed again) → refunded. */
  status: text('status').notNull().default('requires_payment'),
  /** The simulated provider's event history for this intent: what it delivers (and re-delivers, out of order). */
  events: jsonb('events').$type<Array<{ id: string, type: string, timestamp: string, amount?: number }>>().notNull().default([]),
  /** How many times the provider was asked for this token: > 1 means a retried call, replayed. */
  requests: integer('requests').notNull().default(1),
  /** Σ of the intent's refunds: never more than amount. */
  amountRefunded: bigint('amount_refunded', { mode: 'number' }).notNull().default(0),
  createdAt: createdAt(),
}, t => [
  unique('payment_intents_provider_token_unique').on(t.provider, t.idempotencyToken),
  check('payment_intents_refund_within_amount', sql`${t.amountRefunded} <= ${t.amount}`),
])

/** The simulated provider's refunds: one per idempotency token, as a real provider keeps them. */
export const paymentIntentRefunds = pgTable('payment_intent_refunds', {
  id: text('id').primaryKey(),
  intentId: text('intent_id').notNull().references(() => paymentIntents.id),
  idempotencyToken: text('idempotency_token'),
  amount: bigint('amount', { mode: 'number' }).notNull(),
  requests: integer('requests').notNull().default(1),
  createdAt: createdAt(),
}, t => [unique('payment_intent_refunds_token_unique').on(t.idempotencyToken)])

/** The exactly-once marker: a side effect happens only in the transaction that inserts its marker. */
export const sideEffects = pgTable('side_effects', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  orderId: text('order_id').notNull(),
  /** confirmation_email | invoice | refund_notice:<refund id> */
  effect: text('effect').notNull(),
  jobId: text('job_id'),
  createdAt: createdAt(),
}, t => [unique('side_effects_order_effect_unique').on(t.orderId, t.effect)])

/**
 * The mailbox, shown in the ops console: the emails the app wrote, each with its marker. Without
 * SMTP_URL it is where they end (the dev mailbox); with it, each row is an email the SMTP server
 * accepted, as sent.
 */
export const mailbox = pgTable('mailbox', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull(),
  orderId: text('order_id'),
  to: text('to').notNull(),
  subject: text('subject').notNull(),
  body: text('body').notNull(),
  /** The Message-ID it was sent under (derived from its effect: the same on every attempt); null when it was not sent (no SMTP_URL). */
  messageId: text('message_id'),
  createdAt: createdAt(),
}, t => [
  index('mailbox_order_idx').on(t.orderId),
  // One row per email sent: its Message-ID names its effect.
  uniqueIndex('mailbox_message_id_unique').on(t.messageId).where(sql`${t.messageId} is not null`),
])

export const invoices = pgTable('invoices', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull(),
  orderId: text('order_id').notNull(),
  amount: bigint('amount', { mode: 'number' }).notNull(),
  currency: text('currency').notNull(),
  createdAt: createdAt(),
}, t => [index('invoices_order_idx').on(t.orderId)])

/**
 * Every verified provider event, once: the raw body and the signature headers are kept so the
 * delivery can be verified again. Rejected signatures are never stored here (they are logged).
 */
export const webhookEvents = pgTable('webhook_events', {
  id: text('id').primaryKey(),
  provider: text('provider').notNull(),
  /** The provider's event id (Standard Webhooks `webhook-id`, Stripe `event.id`, derived for Midtrans). */
  eventId: text('event_id').notNull(),
  /** Normalised: payment.succeeded | payment.failed | payment.refunded | payment.updated | refund.updated */
  type: text('type').notNull(),
  orderId: text('order_id').notNull(),
  paymentId: text('payment_id'),
  amount: bigint('amount', { mode: 'number' }),
  currency: text('currency'),
  /** refund.updated: the one refund the event is about (its provider id, ours when the provider echoes it, amount, state). */
  refund: jsonb('refund').$type<{ providerRefundId: string, refundId?: string, amount: number, status: RefundStatus }>(),
  /**
   * payment.refunded: every refund the total counts, when the provider lists them all (a Stripe
   * charge on an API version that embeds its refunds, none left unlisted), each as `refund` is.
   */
  listedRefunds: jsonb('listed_refunds').$type<Array<{ providerRefundId: string, refundId?: string, amount: number, status: RefundStatus }>>(),
  rawBody: text('raw_body').notNull(),
  signatureHeaders: jsonb('signature_headers').$type<Record<string, string>>().notNull(),
  status: text('status').$type<WebhookEventStatus>().notNull().default('received'),
  /** webhook: a signed delivery. reconciliation: the provider's API answer, read because no webhook came (raw_body is that answer). */
  source: text('source').$type<WebhookEventSource>().notNull().default('webhook'),
  /** What the provider's status API said when the event was confirmed before it was applied (Midtrans), or null. */
  confirmation: jsonb('confirmation').$type<Record<string, unknown>>(),
  requestId: text('request_id').notNull(),
  receivedAt: timestamp('received_at', { withTimezone: true }).notNull().defaultNow(),
  processedAt: timestamp('processed_at', { withTimezone: true }),
}, t => [
  unique('webhook_events_provider_event_unique').on(t.provider, t.eventId),
  index('webhook_events_order_idx').on(t.orderId),
  // Evidence by event id, whichever provider sent it.
  index('webhook_events_event_id_idx').on(t.eventId),
  check('webhook_events_status_check', sql`${t.status} in (${sql.raw(webhookEventStatuses.map(status => `'${status}'`).join(', '))})`),
  check('webhook_events_source_check', sql`${t.source} in (${sql.raw(webhookEventSources.map(source => `'${source}'`).join(', '))})`),
])

/**
 * One row per payment event applied to an order or ignored by it, with the reason: the order's
 * story, read by the evidence locker.
 */
export const orderStatusHistory = pgTable('order_status_history', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  orderId: text('order_id').notNull(),
  fromStatus: text('from_status').notNull(),
  /** The status the event asked for (null for an informational event). */
  requestedStatus: text('requested_status'),
  toStatus: text('to_status').notNull(),
  /** applied | ignored */
  outcome: text('outcome').notNull(),
  /** Why an event was ignored: lower_precedence | same_status | amount_mismatch | informational. */
  reason: text('reason'),
  webhookEventId: text('webhook_event_id'),
  /** The refund this row is about (created, settled, failed), when it is about one. */
  refundId: text('refund_id'),
  jobId: text('job_id'),
  requestId: text('request_id'),
  createdAt: createdAt(),
}, t => [
  index('order_status_history_order_idx').on(t.orderId),
  index('order_status_history_webhook_event_idx').on(t.webhookEventId),
])

/**
 * Stock per tenant and SKU (docs/inventory.md). A SKU without a row is untracked. The counts change
 * only by a stock_movements row (its insert trigger applies the deltas); the checks are the fence against
 * overselling: an order whose reservation would take `reserved` past `on_hand` fails as a whole.
 */
export const stock = pgTable('stock', {
  tenantId: text('tenant_id').notNull().references(() => tenants.id),
  sku: text('sku').notNull(),
  onHand: bigint('on_hand', { mode: 'number' }).notNull(),
  reserved: bigint('reserved', { mode: 'number' }).notNull().default(0),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, t => [
  primaryKey({ name: 'stock_pkey', columns: [t.tenantId, t.sku] }),
  check('stock_counts_non_negative', sql`${t.onHand} >= 0 and ${t.reserved} >= 0`),
  check('stock_reserved_within_on_hand', sql`${t.reserved} <= ${t.onHand}`),
])

/**
 * The stock ledger: every change of a stock row, with what caused it. Σ on_hand_delta = on_hand and
 * Σ reserved_delta = reserved, per (tenant, sku): a row inserted here is what moves the counts (the
 * trigger of drizzle/0015_stock_ledger_trigger.sql), so no count changes without its row. One movement per (source, sku, kind), and one
 * settlement (commit or release) per reservation: a retried job, a replayed webhook or two racing
 * instances insert nothing the second time, and the counts move only with an inserted row.
 */
export const stockMovements = pgTable('stock_movements', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  tenantId: text('tenant_id').notNull(),
  sku: text('sku').notNull(),
  kind: text('kind').$type<StockMovementKind>().notNull(),
  sourceType: text('source_type').$type<StockSourceType>().notNull(),
  /** The order, refund or adjustment id; for a count set by PUT, the request's id. */
  sourceId: text('source_id').notNull(),
  /** The order the movement is about (a reservation, its settlement, a refund's restock): its evidence timeline. */
  orderId: text('order_id'),
  /** The units moved (positive; an adjustment's sign is in the deltas). */
  quantity: bigint('quantity', { mode: 'number' }).notNull(),
  onHandDelta: bigint('on_hand_delta', { mode: 'number' }).notNull(),
  reservedDelta: bigint('reserved_delta', { mode: 'number' }).notNull(),
  /** An adjustment's reason; a release's cause (canceled, expired, refused). */
  reason: text('reason'),
  requestId: text('request_id'),
  jobId: text('job_id'),
  createdAt: createdAt(),
}, t => [
  unique('stock_movements_once').on(t.tenantId, t.sourceId, t.sku, t.kind),
  uniqueIndex('stock_movements_settled_once').on(t.tenantId, t.sourceId, t.sku).where(sql`${t.kind} in ('commit', 'release')`),
  index('stock_movements_sku_idx').on(t.tenantId, t.sku, t.id),
  index('stock_movements_order_idx').on(t.orderId).where(sql`${t.orderId} is not null`),
  check('stock_movements_kind_check', sql`${t.kind} in (${sql.raw(stockMovementKinds.map(kind => `'${kind}'`).join(', '))})`),
  check('stock_movements_source_type_check', sql`${t.sourceType} in (${sql.raw(stockSourceTypes.map(type => `'${type}'`).join(', '))})`),
  check('stock_movements_quantity_positive', sql`${t.quantity} > 0`),
])

/**
 * What the shop's systems follow (docs/events.md): one row per change, inserted by the triggers of
 * drizzle/0017_events_triggers.sql in the change's own transaction, so no change commits without its
 * event and none has two. `sequence` is (the writing transaction's id << 12) + the event's place in
 * it: increasing in the order the events become listable (GET /api/events lists only events of
 * transactions older than every one still running), so a cursor never skips an event that commits late.
 */
export const events = pgTable('events', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull(),
  sequence: bigint('sequence', { mode: 'number' }).notNull(),
  type: text('type').$type<EventType>().notNull(),
  /** The order, refund or SKU the event is about. */
  objectId: text('object_id').notNull(),
  /** The order it concerns (an order's or a refund's event): its evidence timeline. */
  orderId: text('order_id'),
  /** The object as GET returns it right after the change. */
  data: jsonb('data').$type<Record<string, unknown>>().notNull(),
  createdAt: createdAt(),
}, t => [
  // GET /api/events: a tenant's events after a cursor, in sequence order.
  uniqueIndex('events_tenant_sequence_idx').on(t.tenantId, t.sequence),
  // The evidence locker and the ops console: an order's events.
  index('events_order_idx').on(t.orderId).where(sql`${t.orderId} is not null`),
  check('events_type_check', sql`${t.type} in (${sql.raw(eventTypes.map(type => `'${type}'`).join(', '))})`),
])

/**
 * Where a tenant's events are sent (docs/events.md#webhook-endpoints). An event is fanned out, in its
 * own transaction, to one `webhook.deliver` job per enabled endpoint subscribed to its type.
 */
export const webhookEndpoints = pgTable('webhook_endpoints', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull().references(() => tenants.id),
  url: text('url').notNull(),
  /** Event types, or `*` for all. */
  events: text('events').array().$type<Array<EventType | '*'>>().notNull(),
  description: text('description'),
  status: text('status').$type<WebhookEndpointStatus>().notNull().default('enabled'),
  /** Why it is disabled: requested (PATCH), gone (it answered 410), failing (for WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS). */
  disabledReason: text('disabled_reason'),
  /** `whsec_…`: signs every delivery; kept to sign, shown only when made. */
  secret: text('secret').notNull(),
  /** The secret before the last rotation, which signs too until `previousSecretExpiresAt`. */
  previousSecret: text('previous_secret'),
  previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true }),
  /** Since when every attempt has failed; null after a success. */
  failingSince: timestamp('failing_since', { withTimezone: true }),
  lastSuccessAt: timestamp('last_success_at', { withTimezone: true }),
  lastFailureAt: timestamp('last_failure_at', { withTimezone: true }),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
}, t => [
  // The fan-out: an event's tenant's enabled endpoints; the list: a tenant's endpoints.
  index('webhook_endpoints_tenant_idx').on(t.tenantId, t.status),
  check('webhook_endpoints_status_check', sql`${t.status} in (${sql.raw(webhookEndpointStatuses.map(status => `'${status}'`).join(', '))})`),
])

/** One row per attempt to deliver an event to an endpoint: what the endpoint answered, and how fast. */
export const webhookAttempts = pgTable('webhook_attempts', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  eventId: text('event_id').notNull(),
  endpointId: text('endpoint_id').notNull(),
  tenantId: text('tenant_id').notNull(),
  orderId: text('order_id'),
  jobId: text('job_id'),
  /** The job's attempt number (1 = first try). */
  attempt: integer('attempt').notNull(),
  /** 2xx (delivered); null when no answer came (timeout, refused connection, address refused). */
  statusCode: integer('status_code'),
  delivered: boolean('delivered').notNull(),
  /** Why it failed, when no status says it: timeout, connection refused, private address. */
  error: text('error'),
  latencyMs: integer('latency_ms').notNull(),
  /** The first WEBHOOK_RESPONSE_EXCERPT_BYTES of the answer's body. */
  responseExcerpt: text('response_excerpt'),
  createdAt: createdAt(),
}, t => [
  // An event's attempts (ops console), an endpoint's recent attempts (its health), an order's (evidence).
  index('webhook_attempts_event_idx').on(t.eventId),
  index('webhook_attempts_endpoint_idx').on(t.endpointId, t.id),
  index('webhook_attempts_order_idx').on(t.orderId).where(sql`${t.orderId} is not null`),
])
