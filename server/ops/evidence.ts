import { and, asc, eq, inArray, like, or, type SQL } from 'drizzle-orm'
import type { Database } from '../db/client'
import { idempotencyRecords, invoices, jobs, mailbox, operatorActions, orders, orderStatusHistory, requestLog, sideEffects, webhookEvents } from '../db/schema'
import { problem } from '../problems'

/**
 * The evidence locker (SPEC §7): everything the database remembers about one key, order, webhook
 * event, request or API key, joined into one chronological timeline — what an operator reads to
 * tell a retried request from a real duplicate. Every lookup goes through an index and is capped, and the
 * timeline is capped too (`truncated` says so), so a hot key cannot make the answer unbounded.
 *
 * Lock events: acquisitions, busy put-backs and lost renewals are logged and counted (metrics), not
 * persisted — a table written on every lock operation would cost more than the locks themselves.
 * What the database does keep is shown: each failed or rescued attempt in the job's error history
 * (`rescued` means the worker's claim lapsed, its lock with it), the worker and fence of the current
 * claim, the completion, and the lock key (`lock:<resource>`) in each job's detail.
 *
 * What can be forged says so. A request entry is `verified: false` ("unverified" in its summary)
 * when the request proved no identity (no tenant key, session, ops token or webhook signature):
 * anyone could have sent it. Request ids in records are the server's own; a client's X-Request-Id
 * is kept apart, and an entry found only through it is marked as the client's id, which anyone
 * can send.
 */

export const evidenceSubjects = ['key', 'orderId', 'eventId', 'requestId', 'keyId'] as const

export interface EvidenceQuery {
  key?: string
  /** Narrows `key` to one scope (`tenant:ten_…`, `provider:standard`). */
  scope?: string
  orderId?: string
  eventId?: string
  /** The server's request id (`req_…`), or a client's X-Request-Id (its entries say so). */
  requestId?: string
  /** An API key (`key_…`): the operator actions on it and the requests that made them. */
  keyId?: string
}

export type EvidenceKind = 'request' | 'idempotency_record' | 'job' | 'job_attempt' | 'webhook_event' | 'order' | 'order_status' | 'side_effect' | 'email' | 'invoice' | 'operator_action'

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

export interface Evidence {
  query: EvidenceQuery
  timeline: EvidenceEntry[]
  truncated: boolean
}

export const MAX_TIMELINE_ENTRIES = 500
/** Rows read per lookup: a lookup that fills it marks the timeline truncated. */
const ROWS_PER_LOOKUP = 200
/** Keys, orders and events one query may fan out to. */
const MAX_EXPANSIONS = 50

/**
 * Entries at the same instant (one transaction shares one `now()`) are ordered by cause: the key is
 * claimed, the business rows are written, their jobs enqueued, the result stored; attempts,
 * effects and the request's own log row follow.
 */
const rankOf = {
  claimed: 0,
  webhook_event: 1,
  order: 1,
  operator_action: 1,
  order_status: 2,
  job: 3,
  stored: 4,
  job_attempt: 5,
  side_effect: 6,
  email: 7,
  invoice: 7,
  request: 8,
} as const

type Sortable = EvidenceEntry & { rank: number, tiebreak: string, ms: number }

/** 400 unless exactly one of key, orderId, eventId, requestId, keyId is given (scope only with key). */
export function requireOneSubject(query: EvidenceQuery): void {
  const given = evidenceSubjects.filter(name => query[name] !== undefined)
  const fail = (message: string, path = '(query)') =>
    problem('validation-failed', `${message} Fix the query and send it again.`, { extensions: { errors: [{ path, message }] } })
  if (given.length !== 1) {
    throw fail(`Give exactly one of key, orderId, eventId, requestId or keyId (got ${given.length ? given.join(' and ') : 'none'}).`)
  }
  if (query.scope !== undefined && query.key === undefined) throw fail('scope narrows a key: send it together with key.', 'scope')
}

type RecordRow = typeof idempotencyRecords.$inferSelect
type RequestRow = typeof requestLog.$inferSelect
type OrderRow = typeof orders.$inferSelect
type JobRow = typeof jobs.$inferSelect
type WebhookEventRow = typeof webhookEvents.$inferSelect
type HistoryRow = typeof orderStatusHistory.$inferSelect
type OperatorActionRow = typeof operatorActions.$inferSelect

/** Said of an entry reached only through a client's X-Request-Id. */
const CLIENT_SUPPLIED = 'the client\'s id; anyone can send it'

const iso = (value: Date | string) => new Date(value).toISOString()
/** Serial ids padded, so the string tiebreak keeps their numeric order. */
const serial = (id: number) => String(id).padStart(16, '0')
const orderOfResource = (resourceId: string | null) => resourceId?.startsWith('order:') ? resourceId.slice('order:'.length) : undefined
const money = (amount: number | null, currency: string | null) => amount === null ? 'no amount' : `${currency ?? ''} ${amount.toLocaleString('en-US')}`.trim()
/** Drops undefined and null ids, so `ids` carries only the links an entry has. */
function idsOf(ids: Partial<Record<keyof EvidenceIds, string | null | undefined>>): EvidenceIds {
  return Object.fromEntries(Object.entries(ids).filter(([, value]) => value !== undefined && value !== null)) as EvidenceIds
}

export async function collectEvidence(db: Database, query: EvidenceQuery): Promise<Evidence> {
  const entries = new Map<string, Sortable>()
  const expanded = new Set<string>()
  /** The provider's event id of each stored webhook event seen, to name it on history rows. */
  const eventIdOf = new Map<string, string>()
  let truncated = false

  const capped = <T>(rows: T[], limit = ROWS_PER_LOOKUP): T[] => {
    if (rows.length >= limit) truncated = true
    return rows
  }
  /** True the first time `what` is expanded; later calls (and calls past the cap) do nothing. */
  const firstTime = (what: string): boolean => {
    if (expanded.has(what)) return false
    if (expanded.size >= MAX_EXPANSIONS) {
      truncated = true
      return false
    }
    expanded.add(what)
    return true
  }
  /** Set while adding what only a client's X-Request-Id led to: those entries say so. */
  let reachedThroughClientId: string | undefined
  const add = (identity: string, rank: number, at: Date | string, entry: Omit<EvidenceEntry, 'at'>) => {
    if (entries.has(identity)) return
    const ms = new Date(at).getTime()
    const marked = reachedThroughClientId === undefined
      ? entry
      : {
          ...entry,
          summary: `${entry.summary} Found through X-Request-Id "${reachedThroughClientId}": ${CLIENT_SUPPLIED}.`,
          detail: { ...entry.detail, matchedBy: 'client_request_id' },
        }
    entries.set(identity, { at: iso(at), ...marked, rank, tiebreak: identity, ms })
  }

  function addRequests(rows: RequestRow[]) {
    for (const row of rows) {
      const answered = row.status === 499 ? 'the client disconnected before the answer (499)' : `answered ${row.status}`
      const verified = row.authenticatedBy !== null
      add(`request:${serial(row.id)}`, rankOf.request, row.createdAt, {
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
  }

  function addOperatorActions(rows: OperatorActionRow[]) {
    for (const row of rows) {
      const keyId = row.action.startsWith('api_key.') ? row.subjectId : undefined
      const prefix = typeof row.detail.keyPrefix === 'string' ? ` (${row.detail.keyPrefix})` : ''
      add(`operator_action:${serial(row.id)}`, rankOf.operator_action, row.createdAt, {
        kind: 'operator_action',
        summary: `Operator action ${row.action} on ${row.subjectId}${prefix} of tenant ${row.tenantId} by ${row.requestId ? `request ${row.requestId}` : 'no request (the command line)'}.`,
        ids: idsOf({ requestId: row.requestId, tenantId: row.tenantId, keyId }),
        detail: { ...row, createdAt: iso(row.createdAt) },
      })
    }
  }

  /** A record's transitions: claimed (created_at), then its stored result or its last change (updated_at). */
  function addRecords(rows: RecordRow[]) {
    for (const row of rows) {
      const { leaseToken: _secret, responseBody, ...fields } = row
      const ids = idsOf({
        key: row.key,
        scope: row.scope,
        requestId: row.requestId,
        orderId: row.resourceType === 'order' ? row.resourceId : undefined,
        webhookEventId: row.resourceType === 'webhook_event' ? row.resourceId : undefined,
        eventId: row.scope.startsWith('provider:') ? row.key : undefined,
      })
      const detail = { ...fields, responseBody, createdAt: iso(row.createdAt), updatedAt: iso(row.updatedAt), expiresAt: iso(row.expiresAt), leaseExpiresAt: row.leaseExpiresAt && iso(row.leaseExpiresAt) }
      add(`record:${row.id}:claimed`, rankOf.claimed, row.createdAt, {
        kind: 'idempotency_record',
        summary: `Key "${row.key}" claimed in ${row.scope} for ${row.route} by request ${row.requestId}.`,
        ids,
        detail: { ...detail, transition: 'claimed' },
      })
      if (row.status === 'processing') {
        if (row.updatedAt.getTime() === row.createdAt.getTime()) continue
        add(`record:${row.id}:updated`, rankOf.stored, row.updatedAt, {
          kind: 'idempotency_record',
          summary: `Key "${row.key}" is still processing after ${row.attempts} attempt(s)${row.error ? `; last failure: ${row.error}` : ''}.`,
          ids,
          detail: { ...detail, transition: 'processing' },
        })
        continue
      }
      const resource = row.resourceId ? ` → ${row.resourceType ?? 'resource'} ${row.resourceId}` : ''
      add(`record:${row.id}:stored`, rankOf.stored, row.updatedAt, {
        kind: 'idempotency_record',
        summary: `Key "${row.key}" stored ${row.status} with ${row.responseStatus}${resource} after ${row.attempts} attempt(s); replays answer this.`,
        ids,
        detail: { ...detail, transition: row.status },
      })
    }
  }

  function addJobs(rows: JobRow[]) {
    for (const job of rows) {
      const orderId = orderOfResource(job.resourceId)
      const webhookEventId = typeof job.payload.webhookEventId === 'string' ? job.payload.webhookEventId : undefined
      const ids = idsOf({ jobId: job.id, orderId, key: job.idempotencyKey, requestId: job.requestId, webhookEventId, eventId: webhookEventId && eventIdOf.get(webhookEventId) })
      const { errors, ...fields } = job
      add(`job:${job.id}`, rankOf.job, job.createdAt, {
        kind: 'job',
        summary: `Job ${job.kind} enqueued for ${job.resourceId ?? 'no resource'}; now ${job.status} after ${job.attempt} of ${job.maxAttempts} attempt(s).`,
        ids,
        detail: { ...fields, lockKey: job.resourceId ? `lock:${job.resourceId}` : null, failedAttempts: errors.length },
      })
      errors.forEach((failure, index) => {
        const next = failure.retryAt ? `retry at ${iso(failure.retryAt)}` : 'dead-lettered'
        add(`job:${job.id}:error:${index}`, rankOf.job_attempt, failure.at, {
          kind: 'job_attempt',
          summary: `Attempt ${failure.attempt} of ${job.kind} ${failure.errorClass === 'rescued' ? 'was rescued' : 'failed'} on ${failure.worker ?? 'an unknown worker'} (${failure.errorClass}: ${failure.message}); ${next}.`,
          ids,
          detail: { ...failure, outcome: failure.errorClass === 'rescued' ? 'rescued' : 'failed' },
        })
      })
      if (job.completedAt) {
        add(`job:${job.id}:completed`, rankOf.job_attempt, job.completedAt, {
          kind: 'job_attempt',
          summary: `Attempt ${job.attempt} of ${job.kind} completed on ${job.lockedBy ?? 'an unknown worker'} (fence ${job.fence ?? '–'}).`,
          ids,
          detail: { attempt: job.attempt, outcome: 'completed', startedAt: job.startedAt && iso(job.startedAt), at: iso(job.completedAt), worker: job.lockedBy, fence: job.fence },
        })
      }
      else if (job.status === 'running' && job.startedAt) {
        add(`job:${job.id}:running:${job.attempt}`, rankOf.job_attempt, job.startedAt, {
          kind: 'job_attempt',
          summary: `Attempt ${job.attempt} of ${job.kind} is running on ${job.lockedBy ?? 'an unknown worker'} (fence ${job.fence ?? '–'}).`,
          ids,
          detail: { attempt: job.attempt, outcome: 'running', startedAt: iso(job.startedAt), heartbeatAt: job.heartbeatAt && iso(job.heartbeatAt), worker: job.lockedBy, fence: job.fence },
        })
      }
    }
  }

  function addHistory(rows: HistoryRow[]) {
    for (const row of rows) {
      const change = row.outcome === 'applied'
        ? `moved ${row.fromStatus} → ${row.toStatus}`
        : `stayed ${row.toStatus} (ignored${row.requestedStatus ? ` ${row.requestedStatus}` : ''}: ${row.reason ?? 'no reason'})`
      add(`history:${serial(row.id)}`, rankOf.order_status, row.createdAt, {
        kind: 'order_status',
        summary: `Order ${row.orderId} ${change}${row.webhookEventId ? ` by webhook event ${row.webhookEventId}` : ''}.`,
        ids: idsOf({ orderId: row.orderId, jobId: row.jobId, requestId: row.requestId, webhookEventId: row.webhookEventId, eventId: row.webhookEventId && eventIdOf.get(row.webhookEventId) }),
        detail: { ...row, createdAt: iso(row.createdAt) },
      })
    }
  }

  function addOrder(order: OrderRow) {
    add(`order:${order.id}`, rankOf.order, order.createdAt, {
      kind: 'order',
      summary: `Order ${order.id} created for cart ${order.cartId} (${money(order.amount, order.currency)}, ${order.customer.email}) by request ${order.requestId}; now ${order.status}`
        + `${order.paymentIntentId ? `; payment ${order.paymentIntentId} at ${order.paymentProvider}` : ''}${order.paymentError ? `; ${order.paymentProvider} refused the payment (${order.paymentError.code}: ${order.paymentError.providerMessage})` : ''}.`,
      ids: idsOf({ orderId: order.id, key: order.idempotencyKey, scope: `tenant:${order.tenantId}`, requestId: order.requestId }),
      // The next action's type only: a Stripe client secret is for the shopper's browser, not the console.
      detail: { ...order, paymentNextAction: order.paymentNextAction && { type: order.paymentNextAction.type }, createdAt: iso(order.createdAt), updatedAt: iso(order.updatedAt) },
    })
  }

  /** What the provider's status API said when it confirmed the notification (Midtrans). */
  const confirmationOf = (row: WebhookEventRow) => {
    const said = row.confirmation
    if (!said) return ''
    return said.found ? `; ${row.provider}'s status API said ${String(said.providerStatus)} (${String(said.type)})` : `; ${row.provider}'s status API does not know this payment`
  }

  function addWebhookEvents(rows: WebhookEventRow[]) {
    for (const row of rows) {
      eventIdOf.set(row.id, row.eventId)
      const { rawBody, ...fields } = row
      add(`webhook_event:${row.id}`, rankOf.webhook_event, row.receivedAt, {
        kind: 'webhook_event',
        summary: row.source === 'reconciliation'
          ? `No webhook came: reconciliation asked ${row.provider}'s API for payment ${row.paymentId} and found ${row.type} (${money(row.amount, row.currency)}); stored for order ${row.orderId} as event ${row.eventId}, applied through webhook.apply like a webhook; ${row.status}.`
          : `${row.provider} event ${row.eventId} (${row.type}, ${money(row.amount, row.currency)}) stored for order ${row.orderId} by request ${row.requestId}; ${row.status}${confirmationOf(row)}.`,
        ids: idsOf({ eventId: row.eventId, webhookEventId: row.id, orderId: row.orderId, requestId: row.requestId, key: row.eventId, scope: `provider:${row.provider}` }),
        detail: { ...fields, rawBodyBytes: Buffer.byteLength(rawBody), receivedAt: iso(row.receivedAt), processedAt: row.processedAt && iso(row.processedAt) },
      })
    }
  }

  const recordsWhere = (where: SQL | undefined) =>
    db.select().from(idempotencyRecords).where(where).orderBy(asc(idempotencyRecords.createdAt)).limit(MAX_EXPANSIONS)
  const requestsWhere = (where: SQL | undefined) =>
    db.select().from(requestLog).where(where).orderBy(asc(requestLog.id)).limit(ROWS_PER_LOOKUP)
  const actionsWhere = (where: SQL | undefined) =>
    db.select().from(operatorActions).where(where).orderBy(asc(operatorActions.id)).limit(ROWS_PER_LOOKUP)

  /** The record(s) of a key, every request that carried it, and the resource its record points to. */
  async function expandKey(key: string, scope?: string): Promise<void> {
    if (!firstTime(`key:${scope ?? '*'}:${key}`)) return
    const keyed = scope === undefined ? eq(idempotencyRecords.key, key) : and(eq(idempotencyRecords.scope, scope), eq(idempotencyRecords.key, key))
    const logged = scope === undefined ? eq(requestLog.idempotencyKey, key) : and(eq(requestLog.scope, scope), eq(requestLog.idempotencyKey, key))
    const [records, requests] = await Promise.all([recordsWhere(keyed), requestsWhere(logged)])
    addRecords(capped(records, MAX_EXPANSIONS))
    addRequests(capped(requests))
    for (const record of records) {
      if (record.resourceType === 'order' && record.resourceId) await expandOrder(record.resourceId)
      if (record.resourceType === 'webhook_event' && record.resourceId) {
        await expandWebhookEvents(await db.select().from(webhookEvents).where(eq(webhookEvents.id, record.resourceId)))
      }
    }
  }

  /** Stored events with their deliveries (rejected signatures included), records, apply jobs and history rows. */
  async function expandWebhookEvents(rows: WebhookEventRow[]): Promise<void> {
    const fresh = rows.filter(row => firstTime(`webhook_event:${row.id}`))
    if (!fresh.length) return
    addWebhookEvents(fresh)
    const deliveries = or(...fresh.map(row => and(eq(requestLog.scope, `provider:${row.provider}`), eq(requestLog.idempotencyKey, row.eventId))))
    const eventRecords = or(...fresh.map(row => and(eq(idempotencyRecords.scope, `provider:${row.provider}`), eq(idempotencyRecords.key, row.eventId))))
    const ids = fresh.map(row => row.id)
    const [requests, records, applyJobs, history] = await Promise.all([
      requestsWhere(deliveries),
      recordsWhere(eventRecords),
      db.select().from(jobs).where(and(eq(jobs.kind, 'webhook.apply'), inArray(jobs.dedupeKey, ids))).limit(ROWS_PER_LOOKUP),
      db.select().from(orderStatusHistory).where(inArray(orderStatusHistory.webhookEventId, ids)).orderBy(asc(orderStatusHistory.id)).limit(ROWS_PER_LOOKUP),
    ])
    addRequests(capped(requests))
    addRecords(capped(records, MAX_EXPANSIONS))
    addJobs(capped(applyJobs))
    addHistory(capped(history))
  }

  /** The order, its creating key, its jobs, payment events, status history and effects. */
  async function expandOrder(orderId: string): Promise<void> {
    if (!firstTime(`order:${orderId}`)) return
    const [order] = await db.select().from(orders).where(eq(orders.id, orderId))
    if (!order) return
    addOrder(order)
    const [events, orderJobs, history, effects, emails, orderInvoices] = await Promise.all([
      db.select().from(webhookEvents).where(eq(webhookEvents.orderId, orderId)).orderBy(asc(webhookEvents.receivedAt)).limit(MAX_EXPANSIONS),
      db.select().from(jobs).where(eq(jobs.resourceId, `order:${orderId}`)).orderBy(asc(jobs.createdAt)).limit(ROWS_PER_LOOKUP),
      db.select().from(orderStatusHistory).where(eq(orderStatusHistory.orderId, orderId)).orderBy(asc(orderStatusHistory.id)).limit(ROWS_PER_LOOKUP),
      db.select().from(sideEffects).where(eq(sideEffects.orderId, orderId)).limit(ROWS_PER_LOOKUP),
      db.select().from(mailbox).where(eq(mailbox.orderId, orderId)).limit(ROWS_PER_LOOKUP),
      db.select().from(invoices).where(eq(invoices.orderId, orderId)).limit(ROWS_PER_LOOKUP),
    ])
    // Events first: jobs and history rows are then named by the provider's event id too.
    await expandWebhookEvents(capped(events, MAX_EXPANSIONS))
    addJobs(capped(orderJobs))
    addHistory(capped(history))
    for (const effect of capped(effects)) {
      add(`side_effect:${serial(effect.id)}`, rankOf.side_effect, effect.createdAt, {
        kind: 'side_effect',
        summary: `Side effect ${effect.effect} of order ${effect.orderId} marked done by job ${effect.jobId ?? 'unknown'}.`,
        ids: idsOf({ orderId: effect.orderId, jobId: effect.jobId }),
        detail: { ...effect, createdAt: iso(effect.createdAt) },
      })
    }
    for (const email of capped(emails)) {
      add(`email:${email.id}`, rankOf.email, email.createdAt, {
        kind: 'email',
        summary: `Email "${email.subject}" sent to ${email.to}.`,
        ids: idsOf({ orderId: email.orderId }),
        detail: { ...email, createdAt: iso(email.createdAt) },
      })
    }
    for (const invoice of capped(orderInvoices)) {
      add(`invoice:${invoice.id}`, rankOf.invoice, invoice.createdAt, {
        kind: 'invoice',
        summary: `Invoice ${invoice.id} issued for order ${invoice.orderId} (${money(invoice.amount, invoice.currency)}).`,
        ids: idsOf({ orderId: invoice.orderId }),
        detail: { ...invoice, createdAt: iso(invoice.createdAt) },
      })
    }
    if (order.idempotencyKey) await expandKey(order.idempotencyKey, `tenant:${order.tenantId}`)
  }

  if (query.key !== undefined) {
    await expandKey(query.key, query.scope)
  }
  else if (query.orderId !== undefined) {
    await expandOrder(query.orderId)
  }
  else if (query.eventId !== undefined) {
    // Any provider: the stored events, plus every delivery and record under the id — a delivery
    // whose signature was rejected left only its request_log row.
    const [events, requests, records] = await Promise.all([
      db.select().from(webhookEvents).where(eq(webhookEvents.eventId, query.eventId)).limit(MAX_EXPANSIONS),
      requestsWhere(and(eq(requestLog.idempotencyKey, query.eventId), like(requestLog.scope, 'provider:%'))),
      recordsWhere(and(eq(idempotencyRecords.key, query.eventId), like(idempotencyRecords.scope, 'provider:%'))),
    ])
    await expandWebhookEvents(capped(events, MAX_EXPANSIONS))
    addRequests(capped(requests))
    addRecords(capped(records, MAX_EXPANSIONS))
  }
  else if (query.requestId !== undefined) {
    // The server's id, and the client's X-Request-Id column: a client may have sent the very id of
    // another request. What only the client's id leads to is added last, and marked.
    const requestId = query.requestId
    const requests = capped(await requestsWhere(or(eq(requestLog.requestId, requestId), eq(requestLog.clientRequestId, requestId))))
    const expandRequests = async (rows: RequestRow[]) => {
      addRequests(rows)
      for (const request of rows) {
        if (request.idempotencyKey) await expandKey(request.idempotencyKey, request.scope ?? undefined)
      }
    }
    addOperatorActions(capped(await actionsWhere(eq(operatorActions.requestId, requestId))))
    await expandRequests(requests.filter(request => request.requestId === requestId))
    const byClientId = requests.filter(request => request.requestId !== requestId)
    if (byClientId.length) {
      reachedThroughClientId = requestId
      addOperatorActions(capped(await actionsWhere(inArray(operatorActions.requestId, byClientId.map(request => request.requestId)))))
      await expandRequests(byClientId)
      reachedThroughClientId = undefined
    }
  }
  else if (query.keyId !== undefined) {
    const actions = capped(await actionsWhere(eq(operatorActions.subjectId, query.keyId)))
    addOperatorActions(actions)
    const requestIds = [...new Set(actions.flatMap(action => (action.requestId ? [action.requestId] : [])))]
    if (requestIds.length) addRequests(capped(await requestsWhere(inArray(requestLog.requestId, requestIds))))
  }

  const sorted = [...entries.values()].sort((a, b) => a.ms - b.ms || a.rank - b.rank || (a.tiebreak < b.tiebreak ? -1 : a.tiebreak > b.tiebreak ? 1 : 0))
  if (sorted.length > MAX_TIMELINE_ENTRIES) truncated = true
  const timeline = sorted.slice(0, MAX_TIMELINE_ENTRIES).map(({ rank: _rank, tiebreak: _tiebreak, ms: _ms, ...entry }) => entry)
  return { query, timeline, truncated }
}
