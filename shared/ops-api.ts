import type { z } from 'zod'
import type * as Schemas from './api-schemas'
import type { OrderView, RefundView } from './orders'
import type { EventType, IdempotencyStatus, JobStatus, LedgerDiscrepancyKind, LedgerDiscrepancyStatus, RefundReason, StockMovementKind, StockSourceType, WebhookEndpointStatus } from './statuses'

/**
 * The answers of /api/ops/**, shared by the server (each route's return value must satisfy its
 * type, so a change on one side fails the type check) and the ops console. Timestamps travel as
 * ISO 8601 strings; on the server a row still holds Dates, hence the `Time` parameter: the console
 * uses the default (string), a route checks its value with `Date`. Each is held equal to its schema
 * in ./api-schemas at the end of this file, by a type-only import: a page that imports this file
 * loads no schema, and ./api-schemas never imports it.
 */

export type OpsTime = string | Date

/** GET listings: newest first, at most `limit` rows. */
export interface OpsList<T> { object: 'list', data: T[] }

/** One failed or rescued attempt in a job's history (database clock). */
export interface OpsJobError {
  attempt: number
  /** When the attempt failed. */
  at: string
  startedAt: string | null
  /** When the next attempt was scheduled; null when the job was dead-lettered. */
  retryAt: string | null
  /** retryable | permanent | rescued */
  errorClass: string
  message: string
  worker: string | null
}

/** GET /api/ops/jobs rows, POST /api/ops/jobs/{id}/retry and /dismiss. */
export interface OpsJob<Time extends OpsTime = string> {
  id: string
  kind: string
  dedupeKey: string
  payload: Record<string, unknown>
  status: JobStatus
  attempt: number
  maxAttempts: number
  snoozes: number
  runAt: Time
  lastError: string | null
  errors: OpsJobError[]
  resourceId: string | null
  idempotencyKey: string | null
  requestId: string | null
  lockedBy: string | null
  fence: number | null
  faults: Record<string, unknown> | null
  startedAt: Time | null
  heartbeatAt: Time | null
  completedAt: Time | null
  /** Why an operator dismissed the dead letter (status dismissed), else null. */
  dismissedReason: string | null
  dismissedAt: Time | null
  createdAt: Time
  updatedAt: Time
}

/** GET /api/ops/idempotency rows: never a record's lease token or stored response body. */
export interface OpsIdempotencyRecord<Time extends OpsTime = string> {
  id: string
  scope: string
  key: string
  route: string
  status: IdempotencyStatus
  attempts: number
  requestId: string | null
  responseStatus: number | null
  resourceType: string | null
  resourceId: string | null
  error: string | null
  createdAt: Time
  updatedAt: Time
  expiresAt: Time
  leaseExpiresAt: Time | null
}

/** GET /api/ops/mailbox rows: the emails the worker wrote (kept in the dev mailbox, or sent with SMTP_URL). */
export interface OpsMailboxMessage<Time extends OpsTime = string> {
  id: string
  tenantId: string
  orderId: string | null
  to: string
  subject: string
  body: string
  /** The Message-ID it was sent under; null when it was not sent (no SMTP_URL). */
  messageId: string | null
  createdAt: Time
}

export interface OpsTenant { id: string, name: string }

/** POST /api/ops/tenants (201): the tenant and its first secret key, shown this once. */
export interface OpsCreatedTenant { tenant: OpsTenant, secretKey: string }

/** POST /api/ops/tenants/{id}/keys (201): another secret key, shown this once. */
export interface OpsIssuedApiKey { object: 'api_key', keyId: string, secretKey: string, createdAt: string }

/** GET /api/ops/tenants/{id}/keys rows: what identifies a key, never its secret or hash. */
export interface OpsApiKey<Time extends OpsTime = string> {
  keyId: string
  keyPrefix: string
  createdAt: Time
  lastUsedAt: Time | null
  revokedAt: Time | null
}

/** POST /api/ops/tasks/{name}: what the task reported. */
export interface OpsTaskRun { result?: unknown }

/** The kinds of ids an evidence search starts from: exactly one per query (`scope` only narrows `key`). */
export const evidenceSubjects = ['key', 'orderId', 'eventId', 'requestId', 'keyId'] as const
export type EvidenceSubject = typeof evidenceSubjects[number]

export interface EvidenceQuery {
  key?: string
  /** Narrows `key` to one scope (`tenant:ten_…`, `provider:standard`). */
  scope?: string
  orderId?: string
  /** A payment provider's event id, or one of ours (`evt_…`, docs/events.md): the search looks for both. */
  eventId?: string
  /** The server's request id (`req_…`), or a client's X-Request-Id (its entries say so). */
  requestId?: string
  /** An API key (`key_…`): the operator actions on it and the requests that made them. */
  keyId?: string
}

export type EvidenceKind = 'request' | 'replays' | 'idempotency_record' | 'job' | 'job_attempt' | 'webhook_event' | 'order' | 'refund' | 'order_status' | 'side_effect' | 'email' | 'invoice' | 'operator_action' | 'ledger_discrepancy' | 'stock_movement' | 'event' | 'webhook_delivery'

export interface EvidenceIds {
  requestId?: string
  key?: string
  scope?: string
  orderId?: string
  jobId?: string
  eventId?: string
  webhookEventId?: string
  tenantId?: string
  keyId?: string
  endpointId?: string
}

export interface EvidenceEntry {
  at: string
  kind: EvidenceKind
  summary: string
  ids: EvidenceIds
  detail: Record<string, unknown>
  /** Request entries only: false when the request proved no identity. */
  verified?: boolean
}

/** GET /api/ops/evidence: one chronological timeline, capped (`truncated` says so). */
export interface Evidence {
  query: EvidenceQuery
  timeline: EvidenceEntry[]
  truncated: boolean
}

export interface BusinessDuplicate {
  tenantId: string
  customerEmail: string
  amount: number
  currency: string
  orders: Array<{ id: string, cartId: string, createdAt: string }>
}

export type ViolationKind
  = | 'side_effect' | 'email' | 'invoice' | 'order_per_cart' | 'order_per_key' | 'webhook_event'
    | 'refund_per_key' | 'refunds_over_amount' | 'provider_refund_per_key' | 'provider_refunds_over_amount'
    | 'stock_settled_twice' | 'stock_off_ledger'

export interface ExactlyOnceViolation {
  kind: ViolationKind
  ids: Record<string, unknown>
  count: number
}

export interface FrequentReplay { scope: string | null, key: string, replays: number }

/** GET /api/ops/audit/duplicates. */
export interface DuplicatesAudit {
  /** True when no exactly-once violation was found; suspects do not count. */
  healthy: boolean
  window: { minutes: number }
  exactlyOnceViolations: ExactlyOnceViolation[]
  suspects: { businessDuplicates: BusinessDuplicate[], frequentReplays: FrequentReplay[] }
}

/** GET /api/ops/orders/{id}: the order as its tenant reads it, and whose it is. */
export type OpsOrder = OrderView & { tenantId: string }

/** POST /api/ops/orders/{id}/refunds body: `amount` defaults to all that remains. */
export interface OpsRefundRequest { amount?: number, reason?: RefundReason }

/** POST /api/ops/orders/{id}/refunds (201): the refund, and the key it was made under. */
export type OpsRefund = RefundView & { idempotency: { key: string, replayed: boolean } }

/** One refund in a ledger: ours carries our id (and the provider's once known), the provider's its own id (and ours when it echoes it). */
export interface LedgerRefund {
  refundId: string | null
  providerRefundId: string | null
  amount: number
  status: 'pending' | 'succeeded' | 'failed'
  /** Ours only: api | provider | automatic. */
  source?: string
}

/** A payment's ledger, in the order's currency and units: what was captured and given back. */
export interface LedgerView {
  /** Ours: the order's status; the provider's: its own word for the payment (succeeded, settlement, partial_refund…). */
  status: string
  currency: string
  /** Ours: the order's amount once paid, else 0; the provider's: what it received. */
  captured: number
  /** Σ of the refunds that succeeded. */
  refunded: number
  refunds: LedgerRefund[]
}

/** GET /api/ops/ledger/discrepancies rows, POST /api/ops/ledger/discrepancies/{id}/resolve. */
export interface OpsLedgerDiscrepancy<Time extends OpsTime = string> {
  id: string
  kind: LedgerDiscrepancyKind
  orderId: string
  tenantId: string
  provider: string
  status: LedgerDiscrepancyStatus
  /** What differs, in a sentence. */
  summary: string
  ours: LedgerView
  theirs: LedgerView
  /** Why it was closed: the operator's note, or that a later check found both ledgers agreeing. */
  resolution: string | null
  /** Who resolved it (the operator's name); null when a later check found it gone. */
  resolvedBy: string | null
  /** When a check first found it. */
  createdAt: Time
  /** The last check that still found it. */
  lastSeenAt: Time
  resolvedAt: Time | null
  updatedAt: Time
}

/** GET /api/ops/inventory rows: a tracked SKU's counts (GET /api/inventory/{sku}), and whose they are. */
export interface OpsStock<Time extends OpsTime = string> {
  object: 'stock'
  tenantId: string
  sku: string
  onHand: number
  reserved: number
  /** onHand − reserved. */
  available: number
  updatedAt: Time
}

/** One row of the stock ledger (docs/inventory.md#the-stock-ledger). */
export interface OpsStockMovement {
  id: number
  sku: string
  kind: StockMovementKind
  sourceType: StockSourceType
  /** The order, refund or adjustment id; for a count set, the request id. */
  sourceId: string
  orderId: string | null
  quantity: number
  onHandDelta: number
  reservedDelta: number
  /** An adjustment's reason; a release's cause (canceled, expired, refused). */
  reason: string | null
  requestId: string | null
  jobId: string | null
  createdAt: string
}

/** GET /api/ops/inventory/{tenantId}/{sku}: the counts, the latest movements, who holds reservations, and the ledger's sums. */
export interface OpsInventory {
  stock: OpsStock
  /** Newest first, at most 100. */
  movements: OpsStockMovement[]
  /** Orders holding a reservation of the SKU, oldest first. */
  holders: Array<{ orderId: string, quantity: number, createdAt: string }>
  /** Σ of the ledger's deltas: equal to the counts. */
  ledger: { onHand: number, reserved: number }
}

/** An event's delivery to one endpoint, summed up from its `webhook.deliver` jobs and recorded attempts. */
export interface OpsEventDelivery<Time extends OpsTime = string> {
  endpointId: string
  /** The endpoint's URL; null when the endpoint was deleted since. */
  url: string | null
  /** The status of its latest delivery job (a resend's, once there is one); null when no job is left (past retention). */
  jobStatus: JobStatus | null
  /** Delivery jobs: the first, and one per resend. */
  jobCount: number
  attemptCount: number
  /** The last attempt's HTTP status; null before any attempt, or when the last one got no answer. */
  lastStatusCode: number | null
  /** True once any attempt got a 2xx. */
  delivered: boolean
  lastAttemptAt: Time | null
}

/** GET /api/ops/events rows: one of our events (docs/events.md) and where it went. */
export interface OpsEvent<Time extends OpsTime = string> {
  id: string
  tenantId: string
  sequence: number
  type: EventType
  /** The order, refund or SKU the event is about. */
  objectId: string
  orderId: string | null
  /** The object as it was right after the change. */
  data: Record<string, unknown>
  createdAt: Time
  /** One per endpoint the event was sent (or is being sent) to. */
  deliveries: Array<OpsEventDelivery<Time>>
}

/** One attempt to deliver an event to an endpoint: what it answered, how fast. */
export interface OpsWebhookAttempt<Time extends OpsTime = string> {
  id: number
  jobId: string | null
  /** The job's attempt number (1 = first try). */
  attempt: number
  statusCode: number | null
  delivered: boolean
  /** Why it failed when no status says it (timeout, refused connection, private address). */
  error: string | null
  latencyMs: number
  /** The start of the answer's body. */
  responseExcerpt: string | null
  createdAt: Time
}

/** A delivery job of an event to an endpoint: the trigger's, or a resend's. */
export interface OpsEventDeliveryJob<Time extends OpsTime = string> {
  id: string
  status: JobStatus
  dedupeKey: string
  resend: boolean
  createdAt: Time
}

/** An event's delivery to one endpoint with its jobs and every attempt, oldest first. */
export interface OpsEventDeliveryDetail<Time extends OpsTime = string> extends OpsEventDelivery<Time> {
  jobs: Array<OpsEventDeliveryJob<Time>>
  attempts: Array<OpsWebhookAttempt<Time>>
}

/** GET /api/ops/events/{id}: the event and, per endpoint, its jobs and every attempt. */
export interface OpsEventDetail<Time extends OpsTime = string> extends Omit<OpsEvent<Time>, 'deliveries'> {
  deliveries: Array<OpsEventDeliveryDetail<Time>>
}

/** POST /api/ops/events/{id}/resend body: one endpoint, or every enabled endpoint subscribed to the event's type. */
export interface OpsResendRequest { endpointId?: string }

/** POST /api/ops/events/{id}/resend (202): the new delivery job per endpoint, each under the event's id. */
export interface OpsResend { eventId: string, jobs: Array<{ endpointId: string, jobId: string }> }

/** GET /api/ops/webhook-endpoints rows: an endpoint and its health, never its secret. */
export interface OpsWebhookEndpoint<Time extends OpsTime = string> {
  id: string
  tenantId: string
  url: string
  events: string[]
  description: string | null
  status: WebhookEndpointStatus
  /** requested, gone (it answered 410) or failing; null while enabled. */
  disabledReason: string | null
  /** Since when every attempt has failed; null after a success. */
  failingSince: Time | null
  lastSuccessAt: Time | null
  lastFailureAt: Time | null
  /** Its attempts of the last 24 hours. */
  last24h: {
    attempts: number
    delivered: number
    /** delivered / attempts; null without attempts. */
    successRate: number | null
    /** The median attempt's latency; null without attempts. */
    p50LatencyMs: number | null
  }
  createdAt: Time
}

/** POST /api/ops/ledger/discrepancies/{id}/resolve. */
export interface OpsResolveDiscrepancyRequest { note: string, operator: string }

// The ops answer types above (generic over the server's Date rows) must each be exactly what its
// schema in ./api-schemas says on the wire, or the type check fails here. Identical, not only
// mutually assignable: an optional field on one side only is a difference too.
type Flat<T> = { [Key in keyof T]: T[Key] }
type Same<A, B> = (<T>() => T extends Flat<A> ? 1 : 2) extends (<T>() => T extends Flat<B> ? 1 : 2) ? true : false
type Holds<Check extends true> = Check
export type OpsTypesMatchSchemas = [
  Holds<Same<OpsJob, z.output<typeof Schemas.OpsJobSchema>>>,
  Holds<Same<OpsJobError, z.output<typeof Schemas.OpsJobErrorSchema>>>,
  Holds<Same<OpsList<OpsJob>, z.output<typeof Schemas.OpsJobListSchema>>>,
  Holds<Same<OpsIdempotencyRecord, z.output<typeof Schemas.OpsIdempotencyRecordSchema>>>,
  Holds<Same<OpsMailboxMessage, z.output<typeof Schemas.OpsMailboxMessageSchema>>>,
  Holds<Same<OpsCreatedTenant, z.output<typeof Schemas.OpsCreatedTenantSchema>>>,
  Holds<Same<OpsIssuedApiKey, z.output<typeof Schemas.OpsIssuedApiKeySchema>>>,
  Holds<Same<OpsApiKey, z.output<typeof Schemas.OpsApiKeySchema>>>,
  Holds<Same<OpsTaskRun, z.output<typeof Schemas.OpsTaskRunSchema>>>,
  Holds<Same<Evidence, z.output<typeof Schemas.EvidenceSchema>>>,
  Holds<Same<DuplicatesAudit, z.output<typeof Schemas.DuplicatesAuditSchema>>>,
  Holds<Same<OpsOrder, z.output<typeof Schemas.OpsOrderSchema>>>,
  Holds<Same<OpsRefund, z.output<typeof Schemas.RefundResponseSchema>>>,
  Holds<Same<OpsLedgerDiscrepancy, z.output<typeof Schemas.OpsLedgerDiscrepancySchema>>>,
  Holds<Same<OpsList<OpsLedgerDiscrepancy>, z.output<typeof Schemas.OpsLedgerDiscrepancyListSchema>>>,
  Holds<Same<OpsStock, z.output<typeof Schemas.OpsStockSchema>>>,
  Holds<Same<OpsList<OpsStock>, z.output<typeof Schemas.OpsStockListSchema>>>,
  Holds<Same<OpsStockMovement, z.output<typeof Schemas.StockMovementSchema>>>,
  Holds<Same<OpsInventory, z.output<typeof Schemas.OpsInventorySchema>>>,
  Holds<Same<OpsEvent, z.output<typeof Schemas.OpsEventSchema>>>,
  Holds<Same<OpsList<OpsEvent>, z.output<typeof Schemas.OpsEventListSchema>>>,
  Holds<Same<OpsEventDetail, z.output<typeof Schemas.OpsEventDetailSchema>>>,
  Holds<Same<OpsResend, z.output<typeof Schemas.OpsResendSchema>>>,
  Holds<Same<OpsWebhookEndpoint, z.output<typeof Schemas.OpsWebhookEndpointSchema>>>,
  Holds<Same<OpsList<OpsWebhookEndpoint>, z.output<typeof Schemas.OpsWebhookEndpointListSchema>>>,
]
