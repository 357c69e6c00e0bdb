import type { events, invoices, jobs, ledgerDiscrepancies, mailbox, operatorActions, orders, orderStatusHistory, refunds, requestLog, requestLogReplays, sideEffects, stockMovements, webhookAttempts, webhookEvents } from '../db/schema'
import type { idempotencyRecords } from 'nuxt-idempotency/core'
import { paymentIdempotencyKey, refundIdempotencyKey } from '../payments/keys'
import { WebhookDeliveryPayload } from '../webhook-endpoints/job-types'
import type { EvidenceEntry, EvidenceIds } from '../../shared/ops-api'
import { orderIdOfResource, isProviderScope, providerScope, resourceLockKey, tenantScope } from '../../shared/resources'

/**
 * Evidence entries from rows: one pure function per table, no database. Each says what one row
 * (or one transition a row records) means to an operator; server/ops/evidence.ts finds the rows.
 */

/** An entry with what orders it in the timeline and names it once however often its row is found. */
export interface RankedEntry {
  /** Unique per row and transition: the first entry under an identity is kept. */
  identity: string
  /** Order among entries of the same instant (see rankOf). */
  rank: number
  entry: EvidenceEntry
}

/**
 * Entries at the same instant (one transaction shares one `now()`) are ordered by cause: the key is
 * claimed, the business rows are written, their jobs enqueued, the result stored and the events
 * written (at the commit); attempts, effects and the request's own log row follow.
 */
export const rankOf = {
  claimed: 0,
  webhook_event: 1,
  order: 1,
  refund: 1,
  operator_action: 1,
  ledger_discrepancy: 1,
  order_status: 2,
  stock_movement: 2,
  job: 3,
  stored: 4,
  // Written by deferred triggers at the commit, after every statement of the transaction.
  event: 4,
  job_attempt: 5,
  webhook_delivery: 5,
  side_effect: 6,
  email: 7,
  invoice: 7,
  request: 8,
  replays: 8,
} as const

export type RecordRow = typeof idempotencyRecords.$inferSelect
export type RequestRow = typeof requestLog.$inferSelect
export type ReplaysRow = typeof requestLogReplays.$inferSelect
export type OrderRow = typeof orders.$inferSelect
export type JobRow = typeof jobs.$inferSelect
export type WebhookEventRow = typeof webhookEvents.$inferSelect
export type HistoryRow = typeof orderStatusHistory.$inferSelect
export type OperatorActionRow = typeof operatorActions.$inferSelect
export type SideEffectRow = typeof sideEffects.$inferSelect
export type EmailRow = typeof mailbox.$inferSelect
export type InvoiceRow = typeof invoices.$inferSelect
export type RefundRow = typeof refunds.$inferSelect
export type LedgerDiscrepancyRow = typeof ledgerDiscrepancies.$inferSelect
export type StockMovementRow = typeof stockMovements.$inferSelect
export type EventRow = typeof events.$inferSelect
export type WebhookAttemptRow = typeof webhookAttempts.$inferSelect

/** The provider's event id of a stored webhook event (by its row id), when that event was seen. */
export type EventIdOf = (webhookEventId: string) => string | undefined

export const iso = (value: Date | string) => new Date(value).toISOString()
/** Serial ids padded, so the string tiebreak keeps their numeric order. */
const serial = (id: number) => String(id).padStart(16, '0')
const money = (amount: number | null, currency: string | null) => amount === null ? 'no amount' : `${currency ?? ''} ${amount.toLocaleString('en-US')}`.trim()
/** Drops undefined and null ids, so `ids` carries only the links an entry has. */
function idsOf(ids: Partial<Record<keyof EvidenceIds, string | null | undefined>>): EvidenceIds {
  return Object.fromEntries(Object.entries(ids).filter(([, value]) => value !== undefined && value !== null)) as EvidenceIds
}
const ranked = (identity: string, rank: number, at: Date | string, entry: Omit<EvidenceEntry, 'at'>): RankedEntry =>
  ({ identity, rank, entry: { at: iso(at), ...entry } })

export function requestEntry(row: RequestRow): RankedEntry {
  const answered = row.status === 499 ? 'the client disconnected before the answer (499)' : `answered ${row.status}`
  const verified = row.authenticatedBy !== null
  return ranked(`request:${serial(row.id)}`, rankOf.request, row.createdAt, {
    kind: 'request',
    summary: `${row.method} ${row.path} ${answered}${row.outcome ? ` (${row.outcome})` : ''} after ${row.durationMs} ms on ${row.instance}${verified ? '' : '; unverified: no key, session, ops token or signature proved who sent it'}.`,
    ids: idsOf({ requestId: row.requestId, key: row.idempotencyKey, scope: row.scope }),
    verified,
    detail: {
      requestId: row.requestId, clientRequestId: row.clientRequestId, authenticatedBy: row.authenticatedBy,
      method: row.method, path: row.path, tenantId: row.tenantId, scope: row.scope, key: row.idempotencyKey,
      outcome: row.outcome, status: row.status, durationMs: row.durationMs, instance: row.instance, loggedAt: iso(row.createdAt),
    },
  })
}

/** Replays of a key in one minute on one instance, counted after its first replay there (which has its request row). */
export function replaysEntry(row: ReplaysRow): RankedEntry {
  const times = row.replays === 1 ? 'once more' : `${row.replays} more times`
  return ranked(`replays:${row.scope}\n${row.idempotencyKey}\n${iso(row.minute)}\n${row.instance}`, rankOf.replays, row.firstAt, {
    kind: 'replays',
    summary: `${row.method} ${row.path} replayed ${times} (answered ${row.status}) between ${iso(row.firstAt)} and ${iso(row.lastAt)} on ${row.instance}: counted, not logged one by one.`,
    ids: idsOf({ key: row.idempotencyKey, scope: row.scope, tenantId: row.tenantId }),
    detail: {
      method: row.method, path: row.path, tenantId: row.tenantId, scope: row.scope, key: row.idempotencyKey, status: row.status,
      replays: row.replays, minute: iso(row.minute), firstAt: iso(row.firstAt), lastAt: iso(row.lastAt), instance: row.instance,
    },
  })
}

export function operatorActionEntry(row: OperatorActionRow): RankedEntry {
  const keyId = row.action.startsWith('api_key.') ? row.subjectId : undefined
  const jobId = row.action === 'job.dismissed' ? row.subjectId : undefined
  const eventId = row.action === 'event.resent' ? row.subjectId : undefined
  const prefix = typeof row.detail.keyPrefix === 'string' ? ` (${row.detail.keyPrefix})` : ''
  const tenant = row.tenantId ? ` of tenant ${row.tenantId}` : ''
  const reason = typeof row.detail.reason === 'string' ? ` with reason ${JSON.stringify(row.detail.reason)}` : ''
  return ranked(`operator_action:${serial(row.id)}`, rankOf.operator_action, row.createdAt, {
    kind: 'operator_action',
    summary: `Operator action ${row.action} on ${row.subjectId}${prefix}${tenant} by ${row.requestId ? `request ${row.requestId}` : 'no request (the command line)'}${reason}.`,
    ids: idsOf({ requestId: row.requestId, tenantId: row.tenantId, keyId, jobId, eventId }),
    detail: { ...row, createdAt: iso(row.createdAt) },
  })
}

/** A record's transitions: claimed (created_at), then its stored result or its last change (updated_at). */
export function recordEntries(row: RecordRow): RankedEntry[] {
  const { leaseToken: _secret, responseBody, ...fields } = row
  const ids = idsOf({
    key: row.key,
    scope: row.scope,
    requestId: row.requestId,
    orderId: row.resourceType === 'order' ? row.resourceId : undefined,
    webhookEventId: row.resourceType === 'webhook_event' ? row.resourceId : undefined,
    eventId: isProviderScope(row.scope) ? row.key : undefined,
  })
  const detail = { ...fields, responseBody, createdAt: iso(row.createdAt), updatedAt: iso(row.updatedAt), expiresAt: iso(row.expiresAt), leaseExpiresAt: row.leaseExpiresAt && iso(row.leaseExpiresAt) }
  const claimed = ranked(`record:${row.id}:claimed`, rankOf.claimed, row.createdAt, {
    kind: 'idempotency_record',
    summary: `Key "${row.key}" claimed in ${row.scope} for ${row.route} by request ${row.requestId}.`,
    ids,
    detail: { ...detail, transition: 'claimed' },
  })
  if (row.status === 'processing') {
    if (row.updatedAt.getTime() === row.createdAt.getTime()) return [claimed]
    return [claimed, ranked(`record:${row.id}:updated`, rankOf.stored, row.updatedAt, {
      kind: 'idempotency_record',
      summary: `Key "${row.key}" is still processing after ${row.attempts} attempt(s)${row.error ? `; last failure: ${row.error}` : ''}.`,
      ids,
      detail: { ...detail, transition: 'processing' },
    })]
  }
  const resource = row.resourceId ? ` → ${row.resourceType ?? 'resource'} ${row.resourceId}` : ''
  return [claimed, ranked(`record:${row.id}:stored`, rankOf.stored, row.updatedAt, {
    kind: 'idempotency_record',
    summary: `Key "${row.key}" stored ${row.status} with ${row.responseStatus}${resource} after ${row.attempts} attempt(s); replays answer this.`,
    ids,
    detail: { ...detail, transition: row.status },
  })]
}

/** The Idempotency-Key (Midtrans: order_id or refund_key) a job that calls the provider asks under: the same for every attempt. */
function providerKeyOf(job: JobRow): string | undefined {
  const { orderId, refundId } = job.payload as { orderId?: unknown, refundId?: unknown }
  if (job.kind === 'payment.refund' && typeof refundId === 'string') return refundIdempotencyKey(refundId)
  if (job.kind === 'payment.create_intent' && typeof orderId === 'string') return paymentIdempotencyKey(orderId)
  return undefined
}

/** The job, each failed or rescued attempt in its error history, and its completion or running attempt. */
export function jobEntries(job: JobRow, eventIdOf: EventIdOf): RankedEntry[] {
  const webhookEventId = typeof job.payload.webhookEventId === 'string' ? job.payload.webhookEventId : undefined
  // A delivery of one of our events: the event (its webhook-id) and the endpoint it goes to.
  const delivery = job.kind === 'webhook.deliver' ? WebhookDeliveryPayload.safeParse(job.payload).data : undefined
  const ids = idsOf({
    jobId: job.id, orderId: orderIdOfResource(job.resourceId), key: job.idempotencyKey, requestId: job.requestId, webhookEventId,
    eventId: delivery?.eventId ?? (webhookEventId && eventIdOf(webhookEventId)), endpointId: delivery?.endpointId,
  })
  const { errors, ...fields } = job
  const providerKey = providerKeyOf(job)
  const entries = [ranked(`job:${job.id}`, rankOf.job, job.createdAt, {
    kind: 'job',
    summary: `Job ${job.kind} enqueued for ${job.resourceId ?? 'no resource'}; now ${job.status} after ${job.attempt} of ${job.maxAttempts} attempt(s)`
      + `${providerKey ? `; every attempt asks the provider under the key ${providerKey}` : ''}.`,
    ids,
    detail: { ...fields, lockKey: job.resourceId ? resourceLockKey(job.resourceId) : null, failedAttempts: errors.length, ...(providerKey && { providerKey }) },
  })]
  errors.forEach((failure, index) => {
    const next = failure.retryAt ? `retry at ${iso(failure.retryAt)}` : 'dead-lettered'
    entries.push(ranked(`job:${job.id}:error:${index}`, rankOf.job_attempt, failure.at, {
      kind: 'job_attempt',
      summary: `Attempt ${failure.attempt} of ${job.kind} ${failure.errorClass === 'rescued' ? 'was rescued' : 'failed'} on ${failure.worker ?? 'an unknown worker'} (${failure.errorClass}: ${failure.message}); ${next}.`,
      ids,
      detail: { ...failure, outcome: failure.errorClass === 'rescued' ? 'rescued' : 'failed' },
    }))
  })
  if (job.completedAt) {
    entries.push(ranked(`job:${job.id}:completed`, rankOf.job_attempt, job.completedAt, {
      kind: 'job_attempt',
      summary: `Attempt ${job.attempt} of ${job.kind} completed on ${job.lockedBy ?? 'an unknown worker'} (fence ${job.fence ?? '–'}).`,
      ids,
      detail: { attempt: job.attempt, outcome: 'completed', startedAt: job.startedAt && iso(job.startedAt), at: iso(job.completedAt), worker: job.lockedBy, fence: job.fence },
    }))
  }
  else if (job.status === 'running' && job.startedAt) {
    entries.push(ranked(`job:${job.id}:running:${job.attempt}`, rankOf.job_attempt, job.startedAt, {
      kind: 'job_attempt',
      summary: `Attempt ${job.attempt} of ${job.kind} is running on ${job.lockedBy ?? 'an unknown worker'} (fence ${job.fence ?? '–'}).`,
      ids,
      detail: { attempt: job.attempt, outcome: 'running', startedAt: iso(job.startedAt), heartbeatAt: job.heartbeatAt && iso(job.heartbeatAt), worker: job.lockedBy, fence: job.fence },
    }))
  }
  return entries
}

/** A history row's change, as a sentence: an applied row whose status did not change (a refund asked for or settled, for one) did not move the order. */
function historyChange(row: HistoryRow): string {
  const requested = row.requestedStatus ? ` ${row.requestedStatus}` : ''
  if (row.outcome !== 'applied') return `stayed ${row.toStatus} (ignored${requested}: ${row.reason ?? 'no reason'})`
  if (row.fromStatus !== row.toStatus) return `moved ${row.fromStatus} → ${row.toStatus}`
  const what = [row.reason, row.refundId && `refund ${row.refundId}`].filter(Boolean).join(', ')
  return `stayed ${row.toStatus} (applied${requested} without a status change${what ? `: ${what}` : ''})`
}

export function historyEntry(row: HistoryRow, eventIdOf: EventIdOf): RankedEntry {
  const change = historyChange(row)
  return ranked(`history:${serial(row.id)}`, rankOf.order_status, row.createdAt, {
    kind: 'order_status',
    summary: `Order ${row.orderId} ${change}${row.webhookEventId ? ` by webhook event ${row.webhookEventId}` : ''}.`,
    ids: idsOf({ orderId: row.orderId, jobId: row.jobId, requestId: row.requestId, webhookEventId: row.webhookEventId, eventId: row.webhookEventId && eventIdOf(row.webhookEventId) }),
    detail: { ...row, createdAt: iso(row.createdAt) },
  })
}

export function orderEntry(order: OrderRow): RankedEntry {
  return ranked(`order:${order.id}`, rankOf.order, order.createdAt, {
    kind: 'order',
    summary: `Order ${order.id} created for cart ${order.cartId} (${money(order.amount, order.currency)}, ${order.customer.email}) by request ${order.requestId}; now ${order.status}`
      + `${order.paymentIntentId ? `; payment ${order.paymentIntentId} at ${order.paymentProvider}` : ''}${order.paymentError ? `; ${order.paymentProvider} refused the payment (${order.paymentError.code}: ${order.paymentError.providerMessage})` : ''}.`,
    ids: idsOf({ orderId: order.id, key: order.idempotencyKey, scope: tenantScope(order.tenantId), requestId: order.requestId }),
    // The next action's type only: a Stripe client secret is for the shopper's browser, not the console.
    detail: { ...order, paymentNextAction: order.paymentNextAction && { type: order.paymentNextAction.type }, createdAt: iso(order.createdAt), updatedAt: iso(order.updatedAt) },
  })
}

const refundSources: Record<string, string> = {
  api: 'asked for through the API',
  provider: 'made at the provider (its dashboard), learned from its event',
  automatic: 'made automatically: the payment arrived after the order was canceled',
}

export function refundEntry(refund: RefundRow): RankedEntry {
  const settled = refund.status === 'pending' ? 'pending' : `${refund.status}${refund.failure ? ` (${refund.failure})` : ''}`
  const asked = refund.source === 'provider' ? '' : `; asked of the provider under the key ${refundIdempotencyKey(refund.id)}`
  return ranked(`refund:${refund.id}`, rankOf.refund, refund.createdAt, {
    kind: 'refund',
    summary: `Refund ${refund.id} of order ${refund.orderId} (${money(refund.amount, refund.currency)}${refund.reason ? `, ${refund.reason}` : ''}) ${refundSources[refund.source] ?? refund.source}${asked}`
      + `${refund.providerRefundId ? `; the provider's refund ${refund.providerRefundId}` : ''}; ${settled}.`,
    ids: idsOf({ orderId: refund.orderId, key: refund.idempotencyKey, requestId: refund.requestId }),
    detail: { ...refund, createdAt: iso(refund.createdAt), updatedAt: iso(refund.updatedAt), settledAt: refund.settledAt && iso(refund.settledAt), ...(refund.source !== 'provider' && { providerKey: refundIdempotencyKey(refund.id) }) },
  })
}

/** A ledger discrepancy: found (created_at), and resolved (resolved_at) by an operator or a later check; or found and healed at once by the check. */
export function ledgerDiscrepancyEntries(row: LedgerDiscrepancyRow): RankedEntry[] {
  const detail = { ...row, createdAt: iso(row.createdAt), lastSeenAt: iso(row.lastSeenAt), updatedAt: iso(row.updatedAt), resolvedAt: row.resolvedAt && iso(row.resolvedAt) }
  const ids = idsOf({ orderId: row.orderId, tenantId: row.tenantId })
  const differing = `The ledger check found order ${row.orderId}'s ledger and ${row.provider}'s differing (${row.kind}, ${row.id})`
  const found = ranked(`ledger_discrepancy:${row.id}`, rankOf.ledger_discrepancy, row.createdAt, {
    kind: 'ledger_discrepancy',
    summary: row.status === 'healed'
      ? `${differing} and healed it: ${row.summary} ${row.resolution ?? ''}`.trim()
      : `${differing}: ${row.summary}${row.status === 'open' ? ` Still open; last seen ${iso(row.lastSeenAt)}.` : ''}`,
    ids,
    detail,
  })
  if (!row.resolvedAt || row.status === 'healed') return [found]
  return [found, ranked(`ledger_discrepancy:${row.id}:resolved`, rankOf.ledger_discrepancy, row.resolvedAt, {
    kind: 'ledger_discrepancy',
    summary: `Ledger discrepancy ${row.id} (${row.kind}) resolved ${row.resolvedBy ? `by ${row.resolvedBy}: ${JSON.stringify(row.resolution)}` : `by a later check: ${row.resolution ?? ''}`}`.trim(),
    ids,
    detail,
  })]
}

/** What the provider's status API said when it confirmed the notification (Midtrans). */
function confirmationOf(row: WebhookEventRow): string {
  const said = row.confirmation
  if (!said) return ''
  return said.found ? `; ${row.provider}'s status API said ${String(said.providerStatus)} (${String(said.type)})` : `; ${row.provider}'s status API does not know this payment`
}

export function webhookEventEntry(row: WebhookEventRow): RankedEntry {
  const { rawBody, ...fields } = row
  return ranked(`webhook_event:${row.id}`, rankOf.webhook_event, row.receivedAt, {
    kind: 'webhook_event',
    summary: row.source === 'reconciliation'
      ? `No webhook came: reconciliation asked ${row.provider}'s API for payment ${row.paymentId} and found ${row.type} (${money(row.amount, row.currency)}); stored for order ${row.orderId} as event ${row.eventId}, applied through webhook.apply like a webhook; ${row.status}.`
      : `${row.provider} event ${row.eventId} (${row.type}, ${money(row.amount, row.currency)}) stored for order ${row.orderId} by request ${row.requestId}; ${row.status}${confirmationOf(row)}.`,
    ids: idsOf({ eventId: row.eventId, webhookEventId: row.id, orderId: row.orderId, requestId: row.requestId, key: row.eventId, scope: providerScope(row.provider) }),
    detail: { ...fields, rawBodyBytes: Buffer.byteLength(rawBody), receivedAt: iso(row.receivedAt), processedAt: row.processedAt && iso(row.processedAt) },
  })
}

export function sideEffectEntry(effect: SideEffectRow): RankedEntry {
  return ranked(`side_effect:${serial(effect.id)}`, rankOf.side_effect, effect.createdAt, {
    kind: 'side_effect',
    summary: `Side effect ${effect.effect} of order ${effect.orderId} marked done by job ${effect.jobId ?? 'unknown'}.`,
    ids: idsOf({ orderId: effect.orderId, jobId: effect.jobId }),
    detail: { ...effect, createdAt: iso(effect.createdAt) },
  })
}

export function emailEntry(email: EmailRow): RankedEntry {
  return ranked(`email:${email.id}`, rankOf.email, email.createdAt, {
    kind: 'email',
    summary: `Email "${email.subject}" sent to ${email.to}${email.messageId ? ` over SMTP as ${email.messageId}` : ''}.`,
    ids: idsOf({ orderId: email.orderId }),
    detail: { ...email, createdAt: iso(email.createdAt) },
  })
}

export function invoiceEntry(invoice: InvoiceRow): RankedEntry {
  return ranked(`invoice:${invoice.id}`, rankOf.invoice, invoice.createdAt, {
    kind: 'invoice',
    summary: `Invoice ${invoice.id} issued for order ${invoice.orderId} (${money(invoice.amount, invoice.currency)}).`,
    ids: idsOf({ orderId: invoice.orderId }),
    detail: { ...invoice, createdAt: iso(invoice.createdAt) },
  })
}

/** Why a reservation was given back, as the release row's reason says (server/stock/ledger.ts). */
const releaseCauses: Record<string, string> = {
  canceled: 'the order was canceled',
  expired: 'the order expired unpaid',
  refused: 'the provider refused the payment',
}

/** What one stock ledger row did (docs/inventory.md#the-stock-ledger), in a sentence. */
function stockMovementSummary(row: StockMovementRow): string {
  const units = `${row.quantity} × ${row.sku}`
  const signed = (delta: number) => (delta > 0 ? `+${delta}` : `−${-delta}`)
  switch (row.kind) {
    case 'reserve': return `Order ${row.orderId} reserved ${units}: held for it until it is paid, canceled or expires (reserved ${signed(row.reservedDelta)}).`
    case 'commit': return `The payment of order ${row.orderId} took its ${units} off the shelf (on hand ${signed(row.onHandDelta)}, reserved ${signed(row.reservedDelta)}).`
    case 'release': return `Order ${row.orderId}'s ${units} went back on sale: ${releaseCauses[row.reason ?? ''] ?? row.reason ?? 'no reason recorded'} (reserved ${signed(row.reservedDelta)}).`
    case 'restock': return `Refund ${row.sourceId} of order ${row.orderId} put ${units} back on the shelf (on hand ${signed(row.onHandDelta)}).`
    case 'adjust': return `${row.sku} adjusted by hand${row.reason ? ` (${row.reason})` : ''}: on hand ${signed(row.onHandDelta)}.`
    case 'set': return `${row.sku} counted: on hand set ${signed(row.onHandDelta)}.`
  }
}

export function stockMovementEntry(row: StockMovementRow): RankedEntry {
  return ranked(`stock_movement:${serial(row.id)}`, rankOf.stock_movement, row.createdAt, {
    kind: 'stock_movement',
    summary: stockMovementSummary(row),
    ids: idsOf({ orderId: row.orderId, requestId: row.requestId, jobId: row.jobId, tenantId: row.tenantId }),
    detail: { ...row, createdAt: iso(row.createdAt) },
  })
}

/** One of our events (docs/events.md): written by its change's own transaction, at its commit. */
export function eventEntry(row: EventRow): RankedEntry {
  return ranked(`event:${row.id}`, rankOf.event, row.createdAt, {
    kind: 'event',
    summary: `Event ${row.type} ${row.id} (sequence ${row.sequence}) written for ${row.objectId} in the change's own transaction; every delivery of it carries webhook-id ${row.id}.`,
    ids: idsOf({ eventId: row.id, orderId: row.orderId, tenantId: row.tenantId }),
    detail: { ...row, createdAt: iso(row.createdAt) },
  })
}

/** One attempt to deliver one of our events to an endpoint (`url`: undefined when the endpoint was deleted since). */
export function webhookDeliveryEntry(row: WebhookAttemptRow, url: string | undefined): RankedEntry {
  const answer = row.statusCode === null ? `no answer (${row.error ?? 'no reason recorded'})` : `answered ${row.statusCode}${row.error ? ` (${row.error})` : ''}`
  return ranked(`webhook_delivery:${serial(row.id)}`, rankOf.webhook_delivery, row.createdAt, {
    kind: 'webhook_delivery',
    summary: `Attempt ${row.attempt} to deliver event ${row.eventId} to endpoint ${row.endpointId}${url ? ` (${url})` : ''}: ${row.delivered ? 'delivered' : 'not delivered'}, ${answer} after ${row.latencyMs} ms.`,
    ids: idsOf({ eventId: row.eventId, endpointId: row.endpointId, orderId: row.orderId, jobId: row.jobId, tenantId: row.tenantId }),
    detail: { ...row, url: url ?? null, createdAt: iso(row.createdAt) },
  })
}
