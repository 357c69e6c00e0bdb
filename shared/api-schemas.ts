import { z } from 'zod'
import {
  cancelReasons, eventTypes, idempotencyStatuses, jobStatuses, ledgerDiscrepancyKinds, ledgerDiscrepancyStatuses, refundSources, refundStatuses, reservationStatuses,
  stockMovementKinds, stockSourceTypes, webhookEndpointStatuses,
} from './statuses'

/**
 * The API's answers as zod schemas: the OpenAPI description (server/openapi) documents them, the
 * order types in ./orders derive from them, and the ops types in ./ops-api are held equal to them
 * there, so a change on either side fails the type check. Only the server imports this file at
 * runtime; the pages import the types. It imports only ./statuses: the modules that read it are
 * never read by it.
 */

const isoTime = z.iso.datetime({ offset: true }).meta({ description: 'ISO 8601 date and time (UTC, `Z`).', example: '2026-12-01T09:14:03.120Z' })
const minorUnits = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER)
const currency = z.string().meta({ description: 'ISO 4217 code, 3 upper-case letters.', example: 'IDR' })

/** The key a response was made under; `replayed` is true on every answer after the first. */
export const IdempotencySchema = z.object({
  key: z.string().meta({ description: 'The request\'s Idempotency-Key (a webhook\'s event id).' }),
  replayed: z.boolean().meta({ description: 'True when this is the stored answer of an earlier request with the same key.' }),
}).meta({ id: 'Idempotency', description: 'The idempotency key this answer belongs to.' })

export const OrderItemSchema = z.object({
  sku: z.string(),
  quantity: z.number().int().min(1),
  unitPrice: minorUnits,
}).meta({ id: 'OrderItem' })

/** The provider's next step for the shopper, stored on the order once its payment was created. */
export const PaymentNextActionSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('mockpay') }),
  z.object({ type: z.literal('stripe_client_secret'), clientSecret: z.string().meta({ description: 'Handed to Stripe.js (Payment Element) with the publishable key; the page never sees the secret key.' }) }),
  z.object({ type: z.literal('midtrans_bank_transfer'), bank: z.string(), vaNumber: z.string(), expiresAt: z.string().optional() }),
  z.object({ type: z.literal('midtrans_actions'), actions: z.array(z.object({ name: z.string(), method: z.string(), url: z.string() })), expiresAt: z.string().optional() }),
]).meta({ id: 'PaymentNextAction', description: 'What the shopper does next at the provider.' })

export const OrderPaymentSchema = z.object({
  provider: z.string().meta({ description: 'mockpay, stripe or midtrans.' }),
  id: z.string().nullable().meta({ description: 'The provider\'s payment id; null while the provider has not answered yet.' }),
  nextAction: PaymentNextActionSchema.nullable(),
  error: z.object({ code: z.string(), message: z.string() }).nullable().meta({ description: 'After a definitive refusal: the provider\'s code and the shopper\'s words.' }),
  status: z.enum(['ready', 'refused', 'retrying']).meta({ description: 'ready: the next step is known. refused: see `error`. retrying: the provider has not answered yet (an outage); the payment is asked for again automatically.' }),
  lastErrorCode: z.enum(['provider_unavailable']).optional().meta({ description: 'While retrying: what went wrong, as a stable code. provider_unavailable: the provider did not answer, or answered with an error that another attempt may cure.' }),
  lastError: z.string().optional().meta({ description: 'While retrying: what went wrong, as a plain sentence for the shopper. The provider\'s own words are never shown here.' }),
  providerMessage: z.string().optional().meta({ description: 'While retrying, in the operators\' view (GET /api/ops/orders/{id}) only: the last failure as the job recorded it, in the provider\'s words.' }),
  retryAt: isoTime.optional().meta({ description: 'While retrying: when the provider is asked next.' }),
}).meta({ id: 'OrderPayment', description: 'The order\'s payment at its provider: null until the payment.create_intent job ran.' })

/** Its enum (the payment-state ladder) is the server's: server/openapi adds it to the document. */
export const OrderStatusSchema = z.string().meta({ id: 'OrderStatus', description: 'pending_payment < payment_failed < canceled < paid < partially_refunded < refunded: events move an order only up this ladder.' })
/** Its enum is the order schema's (server/orders/schema.ts): server/openapi adds it to the document. */
export const PaymentMethodSchema = z.string().meta({ id: 'PaymentMethod' })

export const CreatedOrderSchema = z.object({
  id: z.string().meta({ example: 'ord_8cf2b5a4d0e1' }),
  object: z.literal('order'),
  status: OrderStatusSchema,
  cartId: z.string(),
  currency,
  amount: minorUnits.meta({ description: 'Integer in the currency\'s minor unit (IDR: whole rupiah).' }),
  paymentMethod: PaymentMethodSchema,
  items: z.array(OrderItemSchema),
  customer: z.object({ email: z.string() }),
  createdAt: isoTime,
}).meta({ id: 'CreatedOrder', description: 'An order as POST /api/orders creates it.' })

export const RefundSchema = z.object({
  id: z.string().meta({ example: 're_51b0c3e2a9f4' }),
  object: z.literal('refund'),
  orderId: z.string(),
  amount: minorUnits.meta({ description: 'In the order\'s currency and units.' }),
  currency,
  status: z.enum(refundStatuses).meta({ description: 'pending: held against the order\'s balance, not yet settled by the provider. failed: the provider refused; its amount is free again.' }),
  reason: z.string().nullable().meta({ description: 'One of requested_by_customer, duplicate, fraudulent; order_canceled for an automatic refund; or null.' }),
  source: z.enum(refundSources).meta({ description: 'api: POST /api/orders/{id}/refunds (or the ops console). provider: made at the provider (its dashboard). automatic: a payment that arrived for a canceled order.' }),
  createdAt: isoTime,
}).meta({ id: 'Refund', description: 'A refund of (part of) an order\'s payment.' })

export const ReservationSchema = z.object({
  sku: z.string(),
  quantity: z.number().int().min(1).meta({ description: 'The units of this SKU the order holds (its items\' quantities summed).' }),
  status: z.enum(reservationStatuses).meta({ description: 'reserved: held for the order. committed: taken by its payment (onHand went down). released: given back (canceled, expired or refused).' }),
}).meta({ id: 'Reservation', description: 'Stock an order holds of one tracked SKU.' })

export const OrderSchema = CreatedOrderSchema.extend({
  paymentIntentId: z.string().nullable(),
  payment: OrderPaymentSchema.nullable(),
  cancelReason: z.enum(cancelReasons).nullable().meta({ description: 'Set when the order is canceled: requested (the API, the page, an operator) or expired (unpaid past ORDER_PAYMENT_TTL_SECONDS).' }),
  amountRefunded: minorUnits.meta({ description: 'Σ of the succeeded refunds, in the order\'s units.' }),
  refunds: z.array(RefundSchema).meta({ description: 'Oldest first.' }),
  reservations: z.array(ReservationSchema).meta({ description: 'One per tracked SKU of the items, by SKU; empty when no item is tracked.' }),
}).meta({ id: 'Order', description: 'An order with its payment, refunds and stock reservations.' })

const withIdempotency = <Shape extends z.ZodRawShape>(schema: z.ZodObject<Shape>) => schema.extend({ idempotency: IdempotencySchema })

/** POST /api/orders (201, and every replay). */
export const CreatedOrderResponseSchema = withIdempotency(CreatedOrderSchema).meta({ id: 'CreatedOrderResponse' })
/** POST /api/orders/{id}/cancel (200, and every replay). */
export const CanceledOrderResponseSchema = withIdempotency(OrderSchema).meta({ id: 'OrderWithIdempotency' })
/** POST /api/orders/{id}/refunds and /api/ops/orders/{id}/refunds (201, and every replay). */
export const RefundResponseSchema = withIdempotency(RefundSchema).meta({ id: 'RefundWithIdempotency' })

// ---------------------------------------------------------------------------------------------
// stock
// ---------------------------------------------------------------------------------------------

export const StockSchema = z.object({
  object: z.literal('stock'),
  sku: z.string().meta({ example: 'SKU-1' }),
  onHand: z.number().int().min(0).meta({ description: 'Units on the shelf, reserved ones included.' }),
  reserved: z.number().int().min(0).meta({ description: 'Units held by unpaid orders.' }),
  available: z.number().int().min(0).meta({ description: 'onHand − reserved: what a new order can take.' }),
  updatedAt: isoTime,
}).meta({ id: 'Stock', description: 'A tracked SKU\'s counts.' })

export const StockWithIdempotencySchema = withIdempotency(StockSchema).meta({ id: 'StockWithIdempotency' })

export const StockListSchema = z.object({
  object: z.literal('list'),
  data: z.array(StockSchema).meta({ description: 'By SKU, at most `limit`.' }),
  hasMore: z.boolean().meta({ description: 'More SKUs follow: ask again with `startingAfter` set to the last SKU of this page.' }),
}).meta({ id: 'StockList' })

export const StockMovementSchema = z.object({
  id: z.number().int(),
  sku: z.string(),
  kind: z.enum(stockMovementKinds).meta({ description: 'reserve, commit and release: an order\'s reservation and its settlement. restock: a refund put units back. adjust, set: the shop changed the count.' }),
  sourceType: z.enum(stockSourceTypes),
  sourceId: z.string().meta({ description: 'The order, refund or adjustment id; for a count set, the request id.' }),
  orderId: z.string().nullable(),
  quantity: z.number().int().min(1),
  onHandDelta: z.number().int(),
  reservedDelta: z.number().int(),
  reason: z.string().nullable(),
  requestId: z.string().nullable(),
  jobId: z.string().nullable(),
  createdAt: isoTime,
}).meta({ id: 'StockMovement', description: 'One row of the stock ledger.' })

/** GET /api/ops/inventory rows: a tracked SKU's counts, and whose they are. */
export const OpsStockSchema = StockSchema.extend({ tenantId: z.string() }).meta({ id: 'OpsStock' })
export const OpsStockListSchema = z.object({
  object: z.literal('list'),
  data: z.array(OpsStockSchema).meta({ description: 'Most recently moved first, at most 100.' }),
}).meta({ id: 'OpsStockList' })

export const OpsInventorySchema = z.object({
  stock: OpsStockSchema,
  movements: z.array(StockMovementSchema).meta({ description: 'Newest first, at most 100.' }),
  holders: z.array(z.object({ orderId: z.string(), quantity: z.number().int().min(1), createdAt: isoTime })).meta({ description: 'Orders holding a reservation of this SKU, oldest first.' }),
  ledger: z.object({ onHand: z.number().int(), reserved: z.number().int() }).meta({ description: 'Σ of the ledger\'s deltas: equal to the counts.' }),
}).meta({ id: 'OpsInventory' })

// ---------------------------------------------------------------------------------------------
// events, the orders list
// ---------------------------------------------------------------------------------------------

export const EventSchema = z.object({
  id: z.string().meta({ example: 'evt_Vb3kq0pZQm2s7xY1aB4cDw', description: 'Also the `webhook-id` of every delivery of this event: a receiver dedupes on it.' }),
  object: z.literal('event'),
  type: z.enum(eventTypes),
  created: z.number().int().meta({ description: 'When the change\'s transaction began: Unix time in seconds.' }),
  sequence: z.number().int().meta({ description: 'Increasing in the order GET /api/events lists the tenant\'s events; not contiguous. A receiver that gets two events of one object keeps the one of the higher sequence.' }),
  data: z.object({ object: z.record(z.string(), z.unknown()).meta({ description: 'The order (as GET /api/orders/{id}), refund (GET /api/orders/{id}/refunds/{refundId}) or stock (GET /api/inventory/{sku}) right after the change.' }) }),
}).meta({ id: 'Event', description: 'A change of an order, a refund or a stock count, written in the change\'s own transaction.' })

export const EventListSchema = z.object({
  object: z.literal('list'),
  data: z.array(EventSchema).meta({ description: 'Oldest first, at most `limit`.' }),
  hasMore: z.boolean().meta({ description: 'More events follow: ask again with `after` set to the last id of this page.' }),
}).meta({ id: 'EventList' })

export const OrderListSchema = z.object({
  object: z.literal('list'),
  data: z.array(OrderSchema).meta({ description: 'Newest first, at most `limit`.' }),
  hasMore: z.boolean().meta({ description: 'Older orders follow: ask again with `starting_after` set to the last id of this page.' }),
}).meta({ id: 'OrderList' })

// ---------------------------------------------------------------------------------------------
// webhooks, mockpay, health
// ---------------------------------------------------------------------------------------------

export const WebhookReceivedSchema = z.object({
  received: z.literal(true),
  eventId: z.string().meta({ description: 'The provider\'s event id: the dedupe key.' }),
  idempotency: IdempotencySchema,
}).meta({ id: 'WebhookReceived', description: 'The event is stored with its processing job (or was already): processing is asynchronous.' })

export const MockpayIntentSchema = z.object({
  id: z.string().meta({ example: 'pi_3b9f0e1c2d4a' }),
  orderId: z.string(),
  status: z.enum(['requires_payment', 'succeeded', 'failed', 'refunded', 'canceled']),
  amount: minorUnits,
  amountRefunded: minorUnits,
  currency,
  events: z.array(z.object({ id: z.string(), type: z.string(), timestamp: isoTime, amount: minorUnits.optional() })).meta({ description: 'Every event of the intent, in order; a refund\'s amount is the total refunded when it happened.' }),
}).meta({ id: 'MockpayIntent', description: 'A payment intent at the simulated provider.' })

export const MockpayActionResultSchema = MockpayIntentSchema.extend({
  deliveriesScheduled: z.number().int().min(0).meta({ description: 'Webhook deliveries this action scheduled (copies and re-sent earlier events included); 0 when it changed nothing.' }),
  refund: z.object({ id: z.string(), amount: minorUnits }).optional().meta({ description: 'The refund this request made (refund only).' }),
}).meta({ id: 'MockpayActionResult' })

export const HealthSchema = z.object({ status: z.literal('ok') }).meta({ id: 'Health' })

const timedCheck = { ok: z.boolean(), latencyMs: z.number().min(0) }
export const ReadinessSchema = z.object({
  status: z.enum(['ready', 'unavailable']),
  checks: z.object({
    database: z.object({ driver: z.enum(['postgres', 'pglite']), poolMode: z.enum(['session', 'transaction']).optional(), ...timedCheck }),
    locks: z.object({ backend: z.enum(['redis', 'memory']), ...timedCheck }),
  }),
  warnings: z.array(z.object({ setting: z.string(), detail: z.string() })).optional().meta({ description: 'For operators: the unsafe test and demo switches this deployment has on (never a reason to be unready).' }),
  webhooks: z.object({ providers: z.array(z.enum(['standard', 'stripe', 'midtrans', 'mockpay'])) }).optional().meta({ description: 'For operators: the webhook endpoints this deployment serves.' }),
  payments: z.object({
    provider: z.string(),
    failing: z.boolean(),
    callsWaitingForRetry: z.number().int(),
    callsOutOfAttempts: z.number().int(),
    lastError: z.object({ kind: z.string(), error: z.string().nullable(), at: isoTime }).optional(),
  }).optional().meta({ description: 'With the ops token only: whether the payment provider is failing.' }),
}).meta({ id: 'Readiness' })

export const CheckoutSessionSchema = z.object({
  tenant: z.object({ id: z.string(), name: z.string() }),
  currency,
  catalogue: z.array(z.object({
    sku: z.string(),
    name: z.string(),
    description: z.string(),
    unitPrice: minorUnits,
    available: z.number().int().min(0).nullable().meta({ description: 'Units an order can take now (onHand − reserved, docs/inventory.md#read-stock); null when the SKU is not tracked.' }),
  })),
  mockpay: z.boolean().meta({ description: 'Whether the simulated provider\'s buttons are offered.' }),
  faults: z.boolean().meta({ description: 'Whether the X-Fault test header is honoured.' }),
}).meta({ id: 'CheckoutSession', description: 'The demo store, and (in Set-Cookie) the page\'s session.' })

// ---------------------------------------------------------------------------------------------
// ops
// ---------------------------------------------------------------------------------------------

const opsList = <Row extends z.ZodType>(row: Row) => z.object({ object: z.literal('list'), data: z.array(row).meta({ description: 'Newest first, at most `limit` rows.' }) })

export const OpsJobErrorSchema = z.object({
  attempt: z.number().int(),
  at: isoTime,
  startedAt: isoTime.nullable(),
  retryAt: isoTime.nullable(),
  errorClass: z.string().meta({ description: 'retryable, permanent or rescued.' }),
  message: z.string(),
  worker: z.string().nullable(),
}).meta({ id: 'OpsJobError' })

export const OpsJobSchema = z.object({
  id: z.string(),
  kind: z.string(),
  dedupeKey: z.string(),
  payload: z.record(z.string(), z.unknown()),
  status: z.enum(jobStatuses),
  attempt: z.number().int(),
  maxAttempts: z.number().int(),
  snoozes: z.number().int(),
  runAt: isoTime,
  lastError: z.string().nullable(),
  errors: z.array(OpsJobErrorSchema),
  resourceId: z.string().nullable(),
  idempotencyKey: z.string().nullable(),
  requestId: z.string().nullable(),
  lockedBy: z.string().nullable(),
  fence: z.number().int().nullable(),
  faults: z.record(z.string(), z.unknown()).nullable(),
  startedAt: isoTime.nullable(),
  heartbeatAt: isoTime.nullable(),
  completedAt: isoTime.nullable(),
  dismissedReason: z.string().nullable(),
  dismissedAt: isoTime.nullable(),
  createdAt: isoTime,
  updatedAt: isoTime,
}).meta({ id: 'OpsJob', description: 'An outbox job.' })
export const OpsJobListSchema = opsList(OpsJobSchema).meta({ id: 'OpsJobList' })

export const OpsIdempotencyRecordSchema = z.object({
  id: z.string(),
  scope: z.string(),
  key: z.string(),
  route: z.string(),
  status: z.enum(idempotencyStatuses),
  attempts: z.number().int(),
  requestId: z.string().nullable(),
  responseStatus: z.number().int().nullable(),
  resourceType: z.string().nullable(),
  resourceId: z.string().nullable(),
  error: z.string().nullable(),
  createdAt: isoTime,
  updatedAt: isoTime,
  expiresAt: isoTime,
  leaseExpiresAt: isoTime.nullable(),
}).meta({ id: 'OpsIdempotencyRecord', description: 'An idempotency record: never its lease token or stored response body.' })
export const OpsIdempotencyRecordListSchema = opsList(OpsIdempotencyRecordSchema).meta({ id: 'OpsIdempotencyRecordList' })

export const OpsMailboxMessageSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  orderId: z.string().nullable(),
  to: z.string(),
  subject: z.string(),
  body: z.string(),
  messageId: z.string().nullable().meta({ description: 'The Message-ID it was sent under over SMTP, derived from its effect (the same on every attempt); null when SMTP_URL is unset and the email stayed in the dev mailbox.', example: '<confirmation_email.ord_0f3a9c@shop.example>' }),
  createdAt: isoTime,
}).meta({ id: 'OpsMailboxMessage', description: 'An email the worker wrote: kept in the dev mailbox, or, with SMTP_URL, sent as it reads here.' })
export const OpsMailboxMessageListSchema = opsList(OpsMailboxMessageSchema).meta({ id: 'OpsMailboxMessageList' })

export const OpsTenantSchema = z.object({ id: z.string().meta({ example: 'ten_0f3a9c' }), name: z.string() }).meta({ id: 'OpsTenant' })
export const OpsCreatedTenantSchema = z.object({ tenant: OpsTenantSchema, secretKey: z.string().meta({ description: 'Shown this once; only its hash is stored.', example: 'sk_Z3k…' }) }).meta({ id: 'OpsCreatedTenant' })
export const OpsIssuedApiKeySchema = z.object({
  object: z.literal('api_key'),
  keyId: z.string(),
  secretKey: z.string().meta({ description: 'Shown this once; only its hash is stored.' }),
  createdAt: isoTime,
}).meta({ id: 'OpsIssuedApiKey' })
export const OpsApiKeySchema = z.object({
  keyId: z.string(),
  keyPrefix: z.string().meta({ description: 'The key\'s first 10 characters.' }),
  createdAt: isoTime,
  lastUsedAt: isoTime.nullable(),
  revokedAt: isoTime.nullable(),
}).meta({ id: 'OpsApiKey', description: 'What identifies a key: never its secret or hash.' })
export const OpsApiKeyListSchema = opsList(OpsApiKeySchema).meta({ id: 'OpsApiKeyList' })

const LedgerRefundSchema = z.object({
  refundId: z.string().nullable().meta({ description: 'Ours (`re_…`); at the provider, ours when it echoes it (Stripe metadata.refund_id, Midtrans refund_key).' }),
  providerRefundId: z.string().nullable(),
  amount: z.number().int().meta({ description: 'In the order\'s units.' }),
  status: z.enum(['pending', 'succeeded', 'failed']),
  source: z.string().optional().meta({ description: 'Ours only: api, provider or automatic.' }),
}).meta({ id: 'LedgerRefund' })
const LedgerViewSchema = z.object({
  status: z.string().meta({ description: 'Ours: the order\'s status; the provider\'s: its word for the payment (or `missing`).' }),
  currency: z.string(),
  captured: z.number().int().meta({ description: 'What was received, in the order\'s units (ours: the amount once the payment was applied).' }),
  refunded: z.number().int().meta({ description: 'Σ of the refunds that succeeded.' }),
  refunds: z.array(LedgerRefundSchema),
}).meta({ id: 'LedgerView' })
export const OpsLedgerDiscrepancySchema = z.object({
  id: z.string().meta({ example: 'ldg_4kQ2…' }),
  kind: z.enum(ledgerDiscrepancyKinds),
  orderId: z.string(),
  tenantId: z.string(),
  provider: z.string(),
  status: z.enum(ledgerDiscrepancyStatuses),
  summary: z.string(),
  ours: LedgerViewSchema,
  theirs: LedgerViewSchema,
  resolution: z.string().nullable(),
  resolvedBy: z.string().nullable().meta({ description: 'The operator who resolved it; null when a later check found both ledgers agreeing.' }),
  createdAt: isoTime,
  lastSeenAt: isoTime,
  resolvedAt: isoTime.nullable(),
  updatedAt: isoTime,
}).meta({ id: 'OpsLedgerDiscrepancy', description: 'A difference between an order\'s ledger and its provider\'s that the ledger check could not heal.' })
export const OpsLedgerDiscrepancyListSchema = opsList(OpsLedgerDiscrepancySchema).meta({ id: 'OpsLedgerDiscrepancyList' })

export const OpsTaskRunSchema = z.object({ result: z.unknown().optional().meta({ description: 'What the task reported.' }) }).meta({ id: 'OpsTaskRun' })

const evidenceKinds = ['request', 'replays', 'idempotency_record', 'job', 'job_attempt', 'webhook_event', 'order', 'refund', 'order_status', 'side_effect', 'email', 'invoice', 'operator_action', 'ledger_discrepancy', 'stock_movement', 'event', 'webhook_delivery'] as const
const optionalText = z.string().optional()
export const EvidenceQuerySchema = z.object({ key: optionalText, scope: optionalText, orderId: optionalText, eventId: optionalText, requestId: optionalText, keyId: optionalText }).meta({ id: 'EvidenceQuery' })
export const EvidenceEntrySchema = z.object({
  at: isoTime,
  kind: z.enum(evidenceKinds),
  summary: z.string(),
  ids: z.object({
    requestId: optionalText,
    key: optionalText,
    scope: optionalText,
    orderId: optionalText,
    jobId: optionalText,
    eventId: optionalText,
    webhookEventId: optionalText,
    tenantId: optionalText,
    keyId: optionalText,
    endpointId: optionalText,
  }),
  detail: z.record(z.string(), z.unknown()),
  verified: z.boolean().optional().meta({ description: 'Request entries only: false when the request proved no identity.' }),
}).meta({ id: 'EvidenceEntry' })
export const EvidenceSchema = z.object({
  query: EvidenceQuerySchema,
  timeline: z.array(EvidenceEntrySchema),
  truncated: z.boolean(),
}).meta({ id: 'Evidence', description: 'One chronological timeline, capped at 500 entries (`truncated` says so).' })

const violationKinds = ['side_effect', 'email', 'invoice', 'order_per_cart', 'order_per_key', 'webhook_event', 'refund_per_key', 'refunds_over_amount', 'provider_refund_per_key', 'provider_refunds_over_amount', 'stock_settled_twice', 'stock_off_ledger'] as const
export const DuplicatesAuditSchema = z.object({
  healthy: z.boolean().meta({ description: 'True when no exactly-once violation was found; suspects do not count.' }),
  window: z.object({ minutes: z.number().int() }),
  exactlyOnceViolations: z.array(z.object({ kind: z.enum(violationKinds), ids: z.record(z.string(), z.unknown()), count: z.number().int() })),
  suspects: z.object({
    businessDuplicates: z.array(z.object({
      tenantId: z.string(),
      customerEmail: z.string(),
      amount: z.number().int(),
      currency: z.string(),
      orders: z.array(z.object({ id: z.string(), cartId: z.string(), createdAt: isoTime })),
    })),
    frequentReplays: z.array(z.object({ scope: z.string().nullable(), key: z.string(), replays: z.number().int() })),
  }),
}).meta({ id: 'DuplicatesAudit' })

export const OpsOrderSchema = OrderSchema.extend({ tenantId: z.string() }).meta({ id: 'OpsOrder', description: 'The order as its tenant reads it, and whose it is.' })

const nullableTime = isoTime.nullable()

/** A webhook endpoint as its tenant reads it (docs/events.md#webhook-endpoints); the secret only where it is made. */
export const WebhookEndpointSchema = z.object({
  id: z.string().meta({ example: 'we_3kQ9xYb2Lm0pRt7v' }),
  object: z.literal('webhook_endpoint'),
  url: z.string().meta({ description: 'Where events are POSTed.', example: 'https://shop.example/webhooks/checkout' }),
  events: z.array(z.enum([...eventTypes, '*'])).meta({ description: 'The event types sent here; `*`: every type.' }),
  description: z.string().nullable(),
  status: z.enum(webhookEndpointStatuses).meta({ description: 'enabled: events are delivered. disabled: nothing is sent (see `disabledReason`); events of the time it was disabled are not sent later.' }),
  disabledReason: z.enum(['requested', 'gone', 'failing']).nullable().meta({ description: 'requested: PATCH status "disabled". gone: the endpoint answered 410. failing: every attempt failed for WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS.' }),
  failingSince: nullableTime.meta({ description: 'Since when every attempt has failed; null after a success, and when re-enabled.' }),
  lastSuccessAt: nullableTime,
  lastFailureAt: nullableTime,
  previousSecretExpiresAt: nullableTime.meta({ description: 'After a rotation: until when the previous secret signs too (a second `v1,` signature).' }),
  createdAt: isoTime,
  updatedAt: isoTime,
}).meta({ id: 'WebhookEndpoint' })

const signingSecret = z.string().regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/).meta({ description: 'The Standard Webhooks signing secret, `whsec_` and base64: shown only in this answer (creation, rotation). Keep it; it cannot be read again.', example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' })

export const WebhookEndpointWithSecretSchema = WebhookEndpointSchema.extend({ secret: signingSecret }).meta({ id: 'WebhookEndpointWithSecret' })
/** What creation and rotation answer: the endpoint, its secret, and the key the answer belongs to. */
export const WebhookEndpointSecretResponseSchema = withIdempotency(WebhookEndpointWithSecretSchema).meta({ id: 'WebhookEndpointSecretResponse' })

export const WebhookEndpointListSchema = z.object({
  object: z.literal('list'),
  data: z.array(WebhookEndpointSchema).meta({ description: 'Newest first, at most `limit`.' }),
  hasMore: z.boolean().meta({ description: 'More endpoints follow: ask again with `startingAfter` set to the last id of this page.' }),
}).meta({ id: 'WebhookEndpointList' })

export const DeletedWebhookEndpointSchema = z.object({
  id: z.string(),
  object: z.literal('webhook_endpoint'),
  deleted: z.literal(true),
}).meta({ id: 'DeletedWebhookEndpoint' })

const OpsEventDeliverySchema = z.object({
  endpointId: z.string(),
  url: z.string().nullable().meta({ description: 'The endpoint\'s URL; null when the endpoint was deleted since.' }),
  jobStatus: z.enum(jobStatuses).nullable().meta({ description: 'The status of its latest `webhook.deliver` job (a resend\'s, once there is one); null when no job is left (past retention).' }),
  jobCount: z.number().int().min(0).meta({ description: 'Delivery jobs: the first, and one per resend.' }),
  attemptCount: z.number().int().min(0),
  lastStatusCode: z.number().int().nullable().meta({ description: 'The last attempt\'s HTTP status; null before any attempt, or when the last one got no answer.' }),
  delivered: z.boolean().meta({ description: 'True once any attempt got a 2xx.' }),
  lastAttemptAt: isoTime.nullable(),
}).meta({ id: 'OpsEventDelivery', description: 'An event\'s delivery to one endpoint, summed up from its jobs and recorded attempts.' })

const opsEventFields = {
  id: z.string().meta({ example: 'evt_2q8Lr0cYt1mB6w9kN3pXaQ' }),
  tenantId: z.string(),
  sequence: z.number().int().meta({ description: 'Increasing per tenant in the order events become listable (docs/events.md).' }),
  type: z.enum(eventTypes),
  objectId: z.string().meta({ description: 'The order, refund or SKU the event is about.' }),
  orderId: z.string().nullable(),
  data: z.record(z.string(), z.unknown()).meta({ description: 'The object as it was right after the change.' }),
  createdAt: isoTime,
}

export const OpsEventSchema = z.object({
  ...opsEventFields,
  deliveries: z.array(OpsEventDeliverySchema).meta({ description: 'One per endpoint the event was sent (or is being sent) to.' }),
}).meta({ id: 'OpsEvent', description: 'One of the events the shop\'s systems follow, and where it went.' })
export const OpsEventListSchema = opsList(OpsEventSchema).meta({ id: 'OpsEventList' })

export const OpsWebhookAttemptSchema = z.object({
  id: z.number().int(),
  jobId: z.string().nullable(),
  attempt: z.number().int().min(1).meta({ description: 'The job\'s attempt number (1 = first try).' }),
  statusCode: z.number().int().nullable(),
  delivered: z.boolean(),
  error: z.string().nullable().meta({ description: 'Why it failed when no status says it: timeout, refused connection, private address.' }),
  latencyMs: z.number().int().min(0),
  responseExcerpt: z.string().nullable().meta({ description: 'The start of the answer\'s body.' }),
  createdAt: isoTime,
}).meta({ id: 'OpsWebhookAttempt', description: 'One attempt to deliver an event to an endpoint.' })

const OpsEventDeliveryJobSchema = z.object({
  id: z.string(),
  status: z.enum(jobStatuses),
  dedupeKey: z.string(),
  resend: z.boolean().meta({ description: 'True for a job an operator\'s resend enqueued.' }),
  createdAt: isoTime,
}).meta({ id: 'OpsEventDeliveryJob' })

export const OpsEventDetailSchema = z.object({
  ...opsEventFields,
  deliveries: z.array(OpsEventDeliverySchema.extend({
    jobs: z.array(OpsEventDeliveryJobSchema).meta({ description: 'Oldest first.' }),
    attempts: z.array(OpsWebhookAttemptSchema).meta({ description: 'Oldest first.' }),
  })),
}).meta({ id: 'OpsEventDetail', description: 'An event and, per endpoint, its delivery jobs and every attempt.' })

export const OpsResendSchema = z.object({
  eventId: z.string(),
  jobs: z.array(z.object({ endpointId: z.string(), jobId: z.string() })).meta({ description: 'One new `webhook.deliver` job per endpoint; each delivers under the event\'s id (`webhook-id`).' }),
}).meta({ id: 'OpsResend' })

export const OpsWebhookEndpointSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  url: z.string(),
  events: z.array(z.string()).meta({ description: 'Event types, or `*` for all.' }),
  description: z.string().nullable(),
  status: z.enum(webhookEndpointStatuses),
  disabledReason: z.string().nullable().meta({ description: 'requested, gone (it answered 410) or failing; null while enabled.' }),
  failingSince: isoTime.nullable().meta({ description: 'Since when every attempt has failed; null after a success.' }),
  lastSuccessAt: isoTime.nullable(),
  lastFailureAt: isoTime.nullable(),
  last24h: z.object({
    attempts: z.number().int().min(0),
    delivered: z.number().int().min(0),
    successRate: z.number().min(0).max(1).nullable().meta({ description: 'delivered / attempts; null without attempts.' }),
    p50LatencyMs: z.number().int().min(0).nullable().meta({ description: 'The median attempt\'s latency; null without attempts.' }),
  }).meta({ description: 'Its attempts of the last 24 hours.' }),
  createdAt: isoTime,
}).meta({ id: 'OpsWebhookEndpoint', description: 'A webhook endpoint and its health; never its secret.' })
export const OpsWebhookEndpointListSchema = opsList(OpsWebhookEndpointSchema).meta({ id: 'OpsWebhookEndpointList' })
