/**
 * The vocabularies of the stored rows' enum columns (statuses, sources, reasons, kinds), shared by
 * the server (drizzle schema, check constraints, zod schemas and filters) and the app (ops console
 * filters, badges and choices). This file imports no other shared module: the schemas
 * (./api-schemas) and the types derived from them (./orders, ./ops-api) read from it, never the
 * other way, so no import runs in a circle.
 */

// The idempotency layer's own (nuxt-idempotency owns that table): its type decides, this list only
// spells it for the pages, and fails to compile when the two differ.
import type { IdempotencyStatus as ModuleIdempotencyStatus } from 'nuxt-idempotency/core'

export const idempotencyStatuses = ['processing', 'succeeded', 'failed'] as const satisfies readonly ModuleIdempotencyStatus[]
export type IdempotencyStatus = typeof idempotencyStatuses[number]
// Every status of the module's is listed: an unlisted one makes this `false` and the line fail.
const listsEveryStatus: [ModuleIdempotencyStatus] extends [IdempotencyStatus] ? true : false = true
void listsEveryStatus

/**
 * queued: waiting for run_at. running: claimed by `locked_by` under `fence`. failed: an attempt
 * failed and the job waits for its retry at run_at. completed. dead_letter: out of attempts or a
 * permanent error; an operator may redrive it, or dismiss it with a reason when it can never
 * succeed. dismissed: final, never claimed, rescued or redriven again.
 */
export const jobStatuses = ['queued', 'running', 'failed', 'completed', 'dead_letter', 'dismissed'] as const
export type JobStatus = typeof jobStatuses[number]

/** received: stored, its webhook.apply job pending. applied: it moved the order. ignored: it could not (see history). */
export const webhookEventStatuses = ['received', 'applied', 'ignored'] as const
export type WebhookEventStatus = typeof webhookEventStatuses[number]
export const webhookEventSources = ['webhook', 'reconciliation'] as const
export type WebhookEventSource = typeof webhookEventSources[number]

/** What a refund may be asked for with (an automatic refund's reason is order_canceled; the column is free text). */
export const refundReasons = ['requested_by_customer', 'duplicate', 'fraudulent'] as const
export type RefundReason = typeof refundReasons[number]
/** pending: held against the order's balance, not yet settled by the provider. failed: the provider refused; its amount is free again. */
export const refundStatuses = ['pending', 'succeeded', 'failed'] as const
export type RefundStatus = typeof refundStatuses[number]
/** api: POST /api/orders/:id/refunds (or the ops console). provider: made at the provider (its dashboard). automatic: a payment that arrived for a canceled order. */
export const refundSources = ['api', 'provider', 'automatic'] as const
export type RefundSource = typeof refundSources[number]

/**
 * What the ledger check (server/ledger) finds and cannot heal, each at most once open per order:
 * - `wrong_amount_captured`: the provider holds a payment of another amount than the order's;
 * - `payment_not_recorded`: the provider holds the payment, the order does not know it was paid;
 * - `payment_not_at_provider`: the order is paid, the provider holds nothing;
 * - `canceled_refund_failed`: a canceled order was paid, and its automatic refund failed;
 * - `refund_not_at_provider`: a refund of ours succeeded that the provider does not have;
 * - `refund_succeeded_at_provider`: a refund of ours failed (or is unknown here) that the provider made;
 * - `refund_amount_mismatch`: one refund, two amounts.
 */
export const ledgerDiscrepancyKinds = [
  'wrong_amount_captured', 'payment_not_recorded', 'payment_not_at_provider', 'canceled_refund_failed',
  'refund_not_at_provider', 'refund_succeeded_at_provider', 'refund_amount_mismatch',
] as const
export type LedgerDiscrepancyKind = typeof ledgerDiscrepancyKinds[number]
/** open: for an operator; healed: the check itself brought our ledger to the provider's (kept so the difference stays visible); resolved: by an operator or a later check. */
export const ledgerDiscrepancyStatuses = ['open', 'healed', 'resolved'] as const
export type LedgerDiscrepancyStatus = typeof ledgerDiscrepancyStatuses[number]

/** What moved stock (docs/inventory.md#the-stock-ledger): each kind's effect on onHand and reserved is fixed. */
export const stockMovementKinds = ['reserve', 'commit', 'release', 'restock', 'adjust', 'set'] as const
export type StockMovementKind = typeof stockMovementKinds[number]

/** What a movement belongs to: its `sourceId` is that order's, refund's or adjustment's id (or the request's, for a count set). */
export const stockSourceTypes = ['order', 'refund', 'adjustment', 'count'] as const
export type StockSourceType = typeof stockSourceTypes[number]

/** Why a goods movement was recorded (POST /api/inventory/:sku/adjustments). */
export const adjustmentReasons = ['received', 'counted', 'damaged', 'returned', 'other'] as const
export type AdjustmentReason = typeof adjustmentReasons[number]

/** Why an unpaid order was canceled: asked for (the API, the page, an operator), or unpaid past ORDER_PAYMENT_TTL_SECONDS. */
export const cancelReasons = ['requested', 'expired'] as const
export type CancelReason = typeof cancelReasons[number]

/** A reservation as GET /api/orders/:id shows it: held, taken by the payment, or given back. */
export const reservationStatuses = ['reserved', 'committed', 'released'] as const
export type ReservationStatus = typeof reservationStatuses[number]

/**
 * What the shop's systems can follow (docs/events.md): one event per change, written in the change's
 * transaction. `stock.updated`: a count set or adjusted by the shop, or units put back by a refund.
 */
export const eventTypes = [
  'order.created', 'order.paid', 'order.payment_failed', 'order.canceled',
  'refund.created', 'refund.succeeded', 'refund.failed', 'stock.updated',
] as const
export type EventType = typeof eventTypes[number]

/** enabled: events are delivered. disabled: by the shop (PATCH), by its answer 410 Gone, or after failing for WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS. */
export const webhookEndpointStatuses = ['enabled', 'disabled'] as const
export type WebhookEndpointStatus = typeof webhookEndpointStatuses[number]
