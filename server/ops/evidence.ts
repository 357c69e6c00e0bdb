import { and, asc, eq, inArray, like, or, type SQL, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import {
  events, invoices, jobs, ledgerDiscrepancies, mailbox, operatorActions, orders, orderStatusHistory, refunds, requestLog, requestLogReplays, sideEffects, stockMovements, webhookAttempts, webhookEndpoints, webhookEvents,
} from '../db/schema'
import { idempotencyRecords } from 'nuxt-idempotency/core'
import { problem } from '../problems'
import { type Evidence, type EvidenceEntry, type EvidenceQuery, evidenceSubjects } from '../../shared/ops-api'
import { ANY_PROVIDER_SCOPE, OPS_SCOPE, orderResource, providerScope, tenantScope } from '../../shared/resources'
import { webhookDeliverJob } from '../webhook-endpoints/job-types'
import {
  emailEntry, eventEntry, type EventIdOf, type EventRow, historyEntry, type HistoryRow, invoiceEntry, jobEntries, type JobRow, ledgerDiscrepancyEntries, operatorActionEntry,
  type OperatorActionRow, orderEntry, type RankedEntry, recordEntries, type RecordRow, refundEntry, replaysEntry, type ReplaysRow, requestEntry, type RequestRow, sideEffectEntry,
  stockMovementEntry, webhookDeliveryEntry, webhookEventEntry, type WebhookEventRow,
} from './evidence-entries'

/**
 * The evidence locker (docs/operations.md#evidence-and-audit): everything the database remembers
 * about one key, order, event (a provider's or ours), request or API key, joined into one chronological timeline —
 * what an operator reads to tell a retried request from a real duplicate. Every lookup goes through
 * an index and is capped, and the timeline is capped too (`truncated` says so), so a hot key cannot
 * make the answer unbounded.
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

export const MAX_TIMELINE_ENTRIES = 500
/** Rows read per lookup: a lookup that fills it marks the timeline truncated. */
const ROWS_PER_LOOKUP = 200
/** Keys, orders and events one query may fan out to. */
const MAX_EXPANSIONS = 50

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

/** Said of an entry reached only through a client's X-Request-Id. */
const CLIENT_SUPPLIED = 'the client\'s id; anyone can send it'

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
  const add = ({ identity, rank, entry }: RankedEntry) => {
    if (entries.has(identity)) return
    const marked = reachedThroughClientId === undefined
      ? entry
      : {
          ...entry,
          summary: `${entry.summary} Found through X-Request-Id "${reachedThroughClientId}": ${CLIENT_SUPPLIED}.`,
          detail: { ...entry.detail, matchedBy: 'client_request_id' },
        }
    entries.set(identity, { ...marked, rank, tiebreak: identity, ms: new Date(entry.at).getTime() })
  }
  const eventIdOfRow: EventIdOf = webhookEventId => eventIdOf.get(webhookEventId)
  const addRequests = (rows: RequestRow[]) => rows.forEach(row => add(requestEntry(row)))
  const addReplays = (rows: ReplaysRow[]) => rows.forEach(row => add(replaysEntry(row)))
  const addOperatorActions = (rows: OperatorActionRow[]) => rows.forEach(row => add(operatorActionEntry(row)))
  const addRecords = (rows: RecordRow[]) => rows.forEach(row => recordEntries(row).forEach(add))
  const addJobs = (rows: JobRow[]) => rows.forEach(row => jobEntries(row, eventIdOfRow).forEach(add))
  const addHistory = (rows: HistoryRow[]) => rows.forEach(row => add(historyEntry(row, eventIdOfRow)))
  const addWebhookEvents = (rows: WebhookEventRow[]) => rows.forEach((row) => {
    eventIdOf.set(row.id, row.eventId)
    add(webhookEventEntry(row))
  })

  const recordsWhere = (where: SQL | undefined) =>
    db.select().from(idempotencyRecords).where(where).orderBy(asc(idempotencyRecords.createdAt)).limit(MAX_EXPANSIONS)
  const requestsWhere = (where: SQL | undefined) =>
    db.select().from(requestLog).where(where).orderBy(asc(requestLog.id)).limit(ROWS_PER_LOOKUP)
  const replaysWhere = (where: SQL | undefined) =>
    db.select().from(requestLogReplays).where(where).orderBy(asc(requestLogReplays.minute)).limit(ROWS_PER_LOOKUP)
  const actionsWhere = (where: SQL | undefined) =>
    db.select().from(operatorActions).where(where).orderBy(asc(operatorActions.id)).limit(ROWS_PER_LOOKUP)

  /** The record(s) of a key, every request that carried it, and the resource its record points to. */
  async function expandKey(key: string, scope?: string): Promise<void> {
    if (!firstTime(`key:${scope ?? '*'}:${key}`)) return
    const keyed = scope === undefined ? eq(idempotencyRecords.key, key) : and(eq(idempotencyRecords.scope, scope), eq(idempotencyRecords.key, key))
    const logged = scope === undefined ? eq(requestLog.idempotencyKey, key) : and(eq(requestLog.scope, scope), eq(requestLog.idempotencyKey, key))
    const counted = scope === undefined ? eq(requestLogReplays.idempotencyKey, key) : and(eq(requestLogReplays.idempotencyKey, key), eq(requestLogReplays.scope, scope))
    const [records, requests, replays] = await Promise.all([recordsWhere(keyed), requestsWhere(logged), replaysWhere(counted)])
    addRecords(capped(records, MAX_EXPANSIONS))
    addRequests(capped(requests))
    addReplays(capped(replays))
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
    const deliveries = or(...fresh.map(row => and(eq(requestLog.scope, providerScope(row.provider)), eq(requestLog.idempotencyKey, row.eventId))))
    const redeliveries = or(...fresh.map(row => and(eq(requestLogReplays.idempotencyKey, row.eventId), eq(requestLogReplays.scope, providerScope(row.provider)))))
    const eventRecords = or(...fresh.map(row => and(eq(idempotencyRecords.scope, providerScope(row.provider)), eq(idempotencyRecords.key, row.eventId))))
    const ids = fresh.map(row => row.id)
    const [requests, replays, records, applyJobs, history] = await Promise.all([
      requestsWhere(deliveries),
      replaysWhere(redeliveries),
      recordsWhere(eventRecords),
      db.select().from(jobs).where(and(eq(jobs.kind, 'webhook.apply'), inArray(jobs.dedupeKey, ids))).limit(ROWS_PER_LOOKUP),
      db.select().from(orderStatusHistory).where(inArray(orderStatusHistory.webhookEventId, ids)).orderBy(asc(orderStatusHistory.id)).limit(ROWS_PER_LOOKUP),
    ])
    addRequests(capped(requests))
    addReplays(capped(replays))
    addRecords(capped(records, MAX_EXPANSIONS))
    addJobs(capped(applyJobs))
    addHistory(capped(history))
  }

  /**
   * Our events (docs/events.md) with their delivery jobs (the first and each resend), every attempt
   * to deliver them, and the operators' resends.
   */
  async function expandOurEvents(rows: EventRow[]): Promise<void> {
    const fresh = rows.filter(row => firstTime(`event:${row.id}`))
    if (!fresh.length) return
    fresh.forEach(row => add(eventEntry(row)))
    const ids = fresh.map(row => row.id)
    const [attempts, deliveryJobs, resends] = await Promise.all([
      db.select().from(webhookAttempts).where(inArray(webhookAttempts.eventId, ids)).orderBy(asc(webhookAttempts.id)).limit(ROWS_PER_LOOKUP),
      db.select().from(jobs).where(and(eq(jobs.kind, webhookDeliverJob.kind), inArray(sql`split_part(${jobs.dedupeKey}, ':', 1)`, ids))).orderBy(asc(jobs.createdAt)).limit(ROWS_PER_LOOKUP),
      actionsWhere(and(eq(operatorActions.action, 'event.resent'), inArray(operatorActions.subjectId, ids))),
    ])
    const endpointIds = [...new Set(attempts.map(attempt => attempt.endpointId))]
    const urls = new Map(endpointIds.length
      ? (await db.select({ id: webhookEndpoints.id, url: webhookEndpoints.url }).from(webhookEndpoints).where(inArray(webhookEndpoints.id, endpointIds))).map(row => [row.id, row.url])
      : [])
    for (const attempt of capped(attempts)) add(webhookDeliveryEntry(attempt, urls.get(attempt.endpointId)))
    addJobs(capped(deliveryJobs))
    addOperatorActions(capped(resends))
  }

  /** The order, its creating key, its jobs, payment events, status history, stock movements, effects and our events. */
  async function expandOrder(orderId: string): Promise<void> {
    if (!firstTime(orderResource(orderId))) return
    const [order] = await db.select().from(orders).where(eq(orders.id, orderId))
    if (!order) return
    add(orderEntry(order))
    const [paymentEvents, orderJobs, history, effects, emails, orderInvoices, orderRefunds, discrepancies, movements, ourEvents] = await Promise.all([
      db.select().from(webhookEvents).where(eq(webhookEvents.orderId, orderId)).orderBy(asc(webhookEvents.receivedAt)).limit(MAX_EXPANSIONS),
      db.select().from(jobs).where(eq(jobs.resourceId, orderResource(orderId))).orderBy(asc(jobs.createdAt)).limit(ROWS_PER_LOOKUP),
      db.select().from(orderStatusHistory).where(eq(orderStatusHistory.orderId, orderId)).orderBy(asc(orderStatusHistory.id)).limit(ROWS_PER_LOOKUP),
      db.select().from(sideEffects).where(eq(sideEffects.orderId, orderId)).limit(ROWS_PER_LOOKUP),
      db.select().from(mailbox).where(eq(mailbox.orderId, orderId)).limit(ROWS_PER_LOOKUP),
      db.select().from(invoices).where(eq(invoices.orderId, orderId)).limit(ROWS_PER_LOOKUP),
      db.select().from(refunds).where(eq(refunds.orderId, orderId)).orderBy(asc(refunds.createdAt)).limit(ROWS_PER_LOOKUP),
      db.select().from(ledgerDiscrepancies).where(eq(ledgerDiscrepancies.orderId, orderId)).orderBy(asc(ledgerDiscrepancies.createdAt)).limit(ROWS_PER_LOOKUP),
      db.select().from(stockMovements).where(eq(stockMovements.orderId, orderId)).orderBy(asc(stockMovements.id)).limit(ROWS_PER_LOOKUP),
      db.select().from(events).where(eq(events.orderId, orderId)).orderBy(asc(events.sequence)).limit(MAX_EXPANSIONS),
    ])
    // Events first: jobs and history rows are then named by the provider's event id too.
    await expandWebhookEvents(capped(paymentEvents, MAX_EXPANSIONS))
    addJobs(capped(orderJobs))
    addHistory(capped(history))
    for (const effect of capped(effects)) add(sideEffectEntry(effect))
    for (const email of capped(emails)) add(emailEntry(email))
    for (const invoice of capped(orderInvoices)) add(invoiceEntry(invoice))
    for (const refund of capped(orderRefunds)) add(refundEntry(refund))
    for (const discrepancy of capped(discrepancies)) ledgerDiscrepancyEntries(discrepancy).forEach(add)
    for (const movement of capped(movements)) add(stockMovementEntry(movement))
    await expandOurEvents(capped(ourEvents, MAX_EXPANSIONS))
    // The operators' resolutions of its discrepancies, with the requests that made them.
    if (discrepancies.length) addOperatorActions(capped(await actionsWhere(inArray(operatorActions.subjectId, discrepancies.map(row => row.id)))))
    if (order.idempotencyKey) await expandKey(order.idempotencyKey, tenantScope(order.tenantId))
    // Each refund asked for through the API: its requests and record, under the shop's key or an operator's.
    for (const refund of orderRefunds) {
      if (!refund.idempotencyKey) continue
      await expandKey(refund.idempotencyKey, tenantScope(order.tenantId))
      await expandKey(refund.idempotencyKey, OPS_SCOPE)
    }
  }

  if (query.key !== undefined) {
    await expandKey(query.key, query.scope)
  }
  else if (query.orderId !== undefined) {
    await expandOrder(query.orderId)
  }
  else if (query.eventId !== undefined) {
    // Any provider: the stored events, plus every delivery and record under the id — a delivery
    // whose signature was rejected left only its request_log row. And ours, sent out: an `evt_…`
    // id is ours or Stripe's, so both are looked for.
    const [paymentEvents, requests, replays, records, ourEvents] = await Promise.all([
      db.select().from(webhookEvents).where(eq(webhookEvents.eventId, query.eventId)).limit(MAX_EXPANSIONS),
      requestsWhere(and(eq(requestLog.idempotencyKey, query.eventId), like(requestLog.scope, ANY_PROVIDER_SCOPE))),
      replaysWhere(and(eq(requestLogReplays.idempotencyKey, query.eventId), like(requestLogReplays.scope, ANY_PROVIDER_SCOPE))),
      recordsWhere(and(eq(idempotencyRecords.key, query.eventId), like(idempotencyRecords.scope, ANY_PROVIDER_SCOPE))),
      query.eventId.startsWith('evt_') ? db.select().from(events).where(eq(events.id, query.eventId)) : [],
    ])
    await expandWebhookEvents(capped(paymentEvents, MAX_EXPANSIONS))
    addRequests(capped(requests))
    addReplays(capped(replays))
    addRecords(capped(records, MAX_EXPANSIONS))
    await expandOurEvents(ourEvents)
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
