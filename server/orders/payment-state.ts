import { and, asc, eq, gte, isNull, lte, sql } from 'drizzle-orm'
import { type Database, type DeferrableQuery, defineStatement, mapRow, queryPrepared, writeAtCommit } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { orders, orderStatusHistory, refunds, webhookEvents } from '../db/schema'
import { enqueueJob, enqueueJobAtCommit } from '../jobs/enqueue'
import { orderIssueInvoiceJob, orderSendConfirmationJob, paymentRefundJob, refundSendNoticeJob } from './job-types'
import type { RefundStatus } from '../../shared/statuses'
import { settlementQuery } from '../stock/ledger'

/**
 * An order's payment state moves only up this ladder, so events that arrive late, twice or out of
 * order cannot undo a later state: a payment_failed after paid changes nothing. Above paid the
 * state follows the refunds that succeeded: partially_refunded below the amount, refunded at it.
 */
export const paymentStatusPrecedence = ['pending_payment', 'payment_failed', 'canceled', 'paid', 'partially_refunded', 'refunded'] as const
export type PaymentStatus = typeof paymentStatusPrecedence[number]

const rank = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus)
/** Whether the order's payment was applied: paid or past it. */
export const isPaid = (status: string) => rank(status) >= rank('paid')

/**
 * Why an event changed nothing. `awaiting_payment`: a refund of an order whose payment has not been
 * applied yet; the refund is kept and the payment, when it is applied, takes the order past paid.
 * `no_refund`: a refund event that tells nothing new (already settled, or less than already known).
 */
export type IgnoredBecause = 'unconfirmed' | 'informational' | 'same_status' | 'lower_precedence' | 'amount_mismatch' | 'awaiting_payment' | 'no_refund'

/** Why a row of the order's history is about a refund. */
export type RefundNote = 'refund_requested' | 'refund_succeeded' | 'refund_failed' | 'refund_at_provider' | 'refund_for_canceled_order' | 'canceled'

export interface PaymentStatusChange {
  from: string
  to: string
  changed: boolean
  reason?: IgnoredBecause
}

/** One refund as a provider event states it (Stripe refund.updated). */
export interface RefundEventDetail {
  providerRefundId: string
  /** Ours, when the provider echoes it (the metadata this app sets). */
  refundId?: string
  amount: number
  status: RefundStatus
}

export interface PaymentStatusContext {
  requestId?: string
  jobId?: string
  webhookEventId?: string
  /**
   * What the provider says was paid; for a refund, the total refunded so far for the payment. A
   * success for another amount or currency does not pay the order.
   */
  amount?: number
  currency?: string
  /** An event about one refund (requested status null): settles that refund. */
  refund?: RefundEventDetail
  /** A total that lists every refund it counts: each is settled by its name before the total is read. */
  listedRefunds?: RefundEventDetail[]
  /** A notification asked for a state the provider's status API does not confirm: history only. */
  unconfirmed?: boolean
  /**
   * The caller reads nothing of the order after this call in its transaction (opened with
   * transaction() of @idempotent-checkout/db-kit): a payment state's writes, its history row and its
   * effects' jobs are sent with the COMMIT (writeAtCommit), no round trip of their own. A refund
   * event, which reads what it wrote, sends its writes as they come.
   */
  writesAtCommit?: boolean
}

const lockedColumns = { id: orders.id, tenantId: orders.tenantId, status: orders.status, amount: orders.amount, currency: orders.currency, checkoutSessionId: orders.checkoutSessionId }
type LockedOrder = ReturnType<typeof mapRow<typeof lockedColumns>>

// Every applied event reads these, prepared: compiled once, sent by the transaction's driver.
const selectLockedOrder = defineStatement<{ id: string, tenantId: string | null }>(db => db.select(lockedColumns).from(orders)
  .where(and(eq(orders.id, sql.placeholder('id')), sql`(${sql.placeholder('tenantId')}::text is null or ${orders.tenantId} = ${sql.placeholder('tenantId')})`)).for('update'))
const selectRefundTotals = defineStatement<{ orderId: string }>(db => db.select({
  succeeded: sql<string>`coalesce(sum(${refunds.amount}) filter (where ${refunds.status} = 'succeeded'), 0)`.as('succeeded'),
  held: sql<string>`coalesce(sum(${refunds.amount}) filter (where ${refunds.status} <> 'failed'), 0)`.as('held'),
  reportable: sql<string>`coalesce(sum(${refunds.amount}) filter (where ${refunds.status} <> 'failed' or ${refunds.providerRefundId} is not null), 0)`.as('reportable'),
}).from(refunds).where(eq(refunds.orderId, sql.placeholder('orderId'))))
const selectSucceededRefunds = defineStatement<{ orderId: string }>(db => db.select({ id: refunds.id }).from(refunds)
  .where(and(eq(refunds.orderId, sql.placeholder('orderId')), eq(refunds.status, 'succeeded'))))

/** The order, row-locked: every change of an order's state and refunds serialises on it. */
export async function lockOrder(tx: Database, orderId: string, tenantId?: string): Promise<LockedOrder | undefined> {
  const [row] = await queryPrepared(tx, selectLockedOrder(tx, { id: orderId, tenantId: tenantId ?? null }))
  return row && mapRow(lockedColumns, row)
}

interface RefundTotals {
  succeeded: number
  /** Every refund not failed: what the payment can no longer give back. */
  held: number
  /**
   * What a total the provider reported may count: every refund held, and each failed one the
   * provider made (it has the provider's id). A total reported while such a refund was pending
   * counted it (Stripe's amount_refunded counts pending refunds), and a total cannot say whether it
   * was written before or after the failure; a refund the provider refused outright never counted.
   */
  reportable: number
}

/** Σ of the order's refunds by state; read under the order's lock, after every earlier holder committed. */
export async function refundTotals(tx: Database, orderId: string): Promise<RefundTotals> {
  const [row] = await queryPrepared(tx, selectRefundTotals(tx, { orderId }))
  return { succeeded: Number(row?.succeeded ?? 0), held: Number(row?.held ?? 0), reportable: Number(row?.reportable ?? 0) }
}

/**
 * Applies a payment event to an order, row-locked, and records it in the order's history either
 * way. Payment states (paid, payment_failed, null for an informational event) apply by precedence;
 * refund events (requested `refunded`, or `context.refund`) settle refunds, and the order's state
 * above paid follows from them. Effects follow the state reached, never the path: reaching paid
 * enqueues the confirmation and the invoice (not for a canceled order, which is given its money
 * back instead, once, automatically), and each succeeded refund of a paid order its own notice.
 */
export async function applyPaymentStatus(
  tx: Database,
  orderId: string,
  requested: PaymentStatus | null,
  context: PaymentStatusContext = {},
): Promise<PaymentStatusChange | undefined> {
  // The totals are read in the same round trip, right after the lock is granted (a statement of its own, so
  // after every earlier holder committed).
  // With the writes at COMMIT, the refunds a paid state notices are read now too: nothing is read after.
  const [order, totals, succeeded] = await Promise.all([
    lockOrder(tx, orderId), refundTotals(tx, orderId), context.writesAtCommit ? succeededRefunds(tx, orderId) : undefined,
  ])
  if (!order) return undefined
  if (!context.unconfirmed && (requested === 'refunded' || context.refund)) return applyRefundEvent(tx, order, requested, { ...context, writesAtCommit: false }, totals)
  const reason = ignoredBecause(order, requested, context)
  let to = order.status
  let note: RefundNote | undefined
  if (!reason && requested) {
    // The automatic refund it may add is pending: what succeeded stays as read.
    if (requested === 'paid' && order.status === 'canceled') note = await refundCanceledOrder(tx, order, context)
    to = requested === 'paid' ? statusAfterRefunds(order, totals.succeeded) : requested
  }
  await Promise.all([
    !reason && requested ? moveTo(tx, order, to, context, succeeded) : undefined,
    recordHistory(tx, { orderId, fromStatus: order.status, requestedStatus: requested, toStatus: to, outcome: reason ? 'ignored' : 'applied', reason: reason ?? note }, context),
  ])
  return { from: order.status, to, changed: !reason, ...(reason && { reason }) }
}

function ignoredBecause(order: LockedOrder, requested: PaymentStatus | null, context: PaymentStatusContext): IgnoredBecause | undefined {
  if (context.unconfirmed) return 'unconfirmed'
  if (requested === null) return 'informational'
  if (requested === order.status) return 'same_status'
  if (rank(requested) < rank(order.status)) return 'lower_precedence'
  const otherCurrency = context.currency !== undefined && context.currency !== order.currency
  // An unknown amount is taken as the order's (a provider that does not say pays in full).
  if (requested === 'paid' && (otherCurrency || (context.amount ?? order.amount) !== order.amount)) return 'amount_mismatch'
  return undefined
}

/** paid, partially_refunded or refunded, by the Σ of the refunds that succeeded. */
export const statusAfterRefunds = (order: Pick<LockedOrder, 'amount'>, succeeded: number): PaymentStatus =>
  succeeded >= order.amount ? 'refunded' : succeeded > 0 ? 'partially_refunded' : 'paid'

/**
 * A refund event: one refund's new state (`context.refund`), or the payment's total refunded so far
 * (`context.amount`; unknown is taken as all of it). A refund the event names is recorded by its
 * name. What a total says beyond every refund it may count (RefundTotals.reportable: those we hold,
 * and failed ones the provider had made) was refunded at the provider (its dashboard): it appears
 * as a succeeded refund of source `provider`, unnamed until an event names it. Pending refunds of
 * ours are settled only by events that name them, by their job's answer or by reconciliation,
 * never by a total (which cannot say which refund it counts).
 */
async function applyRefundEvent(tx: Database, order: LockedOrder, requested: PaymentStatus | null, context: PaymentStatusContext, totals: RefundTotals): Promise<PaymentStatusChange> {
  const settled: Settled[] = context.currency !== undefined && context.currency !== order.currency
    ? [{ reason: 'amount_mismatch' }]
    : context.refund
      ? [await settleNamedRefund(tx, order, totals, context.refund, context)]
      : await settleTotal(tx, order, totals, context)
  const applied = settled.filter(change => 'refundId' in change)
  const last = settled.at(-1)
  let to = order.status
  let reason: IgnoredBecause | undefined = applied.length === 0 && last && 'reason' in last ? last.reason : undefined
  if (!reason) {
    if (isPaid(order.status)) {
      to = statusAfterRefunds(order, (await refundTotals(tx, order.id)).succeeded)
      await moveTo(tx, order, to, context)
    }
    else {
      // Kept: the payment, when it is applied, finds the refund and moves the order past paid.
      reason = 'awaiting_payment'
    }
  }
  // One row per refund the event settled (a listing can settle several), or one saying why it did nothing.
  for (const change of applied.length > 0 ? applied : [undefined]) {
    await recordHistory(tx, {
      orderId: order.id, fromStatus: order.status, requestedStatus: requested, toStatus: to,
      outcome: reason ? 'ignored' : 'applied', reason: reason ?? change?.note, refundId: change?.refundId,
    }, context)
  }
  return { from: order.status, to, changed: !reason, ...(reason && { reason }) }
}

type Settled = { reason: IgnoredBecause } | { refundId: string, note: RefundNote }

/**
 * A total refunded so far. One that lists every refund it counts is each of them, by its name (as
 * if its own event came), and nothing beyond: a listed refund that does not fit beside our holds
 * is recorded when a hold that kept it out fails (recordWhatTheHoldCovered), never as an unnamed
 * difference that its own event would later count again. Without a listing, what the total says
 * beyond every refund it may count is the provider's, unnamed until its own event names it (countedByTotal).
 */
async function settleTotal(tx: Database, order: LockedOrder, totals: RefundTotals, context: PaymentStatusContext): Promise<Settled[]> {
  if (!context.listedRefunds) return [await recordProviderTotal(tx, order, totals, context.amount ?? order.amount, context)]
  const settled: Settled[] = [{ reason: 'no_refund' }]
  for (const refund of context.listedRefunds) settled.push(await settleNamedRefund(tx, order, await refundTotals(tx, order.id), refund, context))
  return settled
}

async function settleNamedRefund(tx: Database, order: LockedOrder, totals: { held: number }, event: RefundEventDetail, context: PaymentStatusContext): Promise<Settled> {
  const [known] = await tx.select({ id: refunds.id, status: refunds.status, providerRefundId: refunds.providerRefundId }).from(refunds)
    .where(and(eq(refunds.orderId, order.id), event.refundId
      ? sql`(${refunds.id} = ${event.refundId} or ${refunds.providerRefundId} = ${event.providerRefundId})`
      : eq(refunds.providerRefundId, event.providerRefundId)))
    .orderBy(asc(refunds.createdAt)).limit(1)
  if (known) {
    if (known.status !== 'pending') return { reason: 'no_refund' }
    const changed = await settleRefund(tx, known.id, { status: event.status, providerRefundId: event.providerRefundId })
    if (changed && event.status === 'failed') await recordWhatTheHoldCovered(tx, order, context)
    return changed && event.status !== 'pending' ? { refundId: known.id, note: event.status === 'succeeded' ? 'refund_succeeded' : 'refund_failed' } : { reason: 'no_refund' }
  }
  // A provider refund new to us: as the provider's events about it last left it (one applied later may be older).
  const latest = { ...event, status: (await providerWords(tx, order, event.providerRefundId)).get(event.providerRefundId)?.status ?? event.status }
  const counted = await countedByTotal(tx, order, latest)
  if (counted) return counted
  if (latest.status === 'failed') {
    // Kept, failed, so a total written while it was pending is never taken for another refund (RefundTotals.reportable).
    const refundId = await insertRefund(tx, order, { amount: latest.amount, status: 'failed', source: 'provider', reason: null, providerRefundId: latest.providerRefundId, requestId: context.requestId })
    return { refundId, note: 'refund_failed' }
  }
  if (totals.held + latest.amount > order.amount) return { reason: 'amount_mismatch' }
  const refundId = await insertRefund(tx, order, { amount: latest.amount, status: latest.status, source: 'provider', reason: null, providerRefundId: latest.providerRefundId, requestId: context.requestId })
  return { refundId, note: 'refund_at_provider' }
}

/**
 * What the provider's stored refund events last said of each refund of the order that is not ours
 * (or of one, `providerRefundId`): failed is final (Stripe's refund can fail after it succeeded),
 * succeeded outranks pending, whatever order they were applied in.
 */
async function providerWords(tx: Database, order: LockedOrder, providerRefundId?: string): Promise<Map<string, RefundEventDetail>> {
  const named = await tx.select({ refund: webhookEvents.refund }).from(webhookEvents)
    .where(and(
      eq(webhookEvents.orderId, order.id), eq(webhookEvents.type, 'refund.updated'), eq(webhookEvents.currency, order.currency),
      providerRefundId === undefined ? undefined : sql`${webhookEvents.refund}->>'providerRefundId' = ${providerRefundId}`,
    ))
    .orderBy(asc(webhookEvents.receivedAt), asc(webhookEvents.id))
  const words = new Map<string, RefundEventDetail>()
  for (const { refund } of named) {
    if (!refund || refund.refundId) continue
    const earlier = words.get(refund.providerRefundId)
    words.set(refund.providerRefundId, earlier?.status === 'failed' || (earlier?.status === 'succeeded' && refund.status === 'pending') ? earlier : refund)
  }
  return words
}

/**
 * A provider refund that a total (charge.refunded) recorded before its own event came: the unnamed
 * refund that holds it takes the event's name (split off when that refund counted several), so the
 * sum never counts it twice; when the event says it failed, the named part fails with it (the total
 * counted it while it was pending). Undefined when no unnamed refund can hold it: the event is a new refund.
 */
async function countedByTotal(tx: Database, order: LockedOrder, event: RefundEventDetail): Promise<Settled | undefined> {
  const [unnamed] = await tx.select({ id: refunds.id, amount: refunds.amount }).from(refunds)
    .where(and(eq(refunds.orderId, order.id), eq(refunds.source, 'provider'), eq(refunds.status, 'succeeded'), isNull(refunds.providerRefundId), gte(refunds.amount, event.amount)))
    .orderBy(asc(refunds.createdAt), asc(refunds.id)).limit(1)
  if (!unnamed) return undefined
  const failed = event.status === 'failed'
  if (unnamed.amount === event.amount) {
    await tx.update(refunds).set({ providerRefundId: event.providerRefundId, ...(failed && { status: 'failed' as const }), updatedAt: sql`now()` }).where(eq(refunds.id, unnamed.id))
    return failed ? { refundId: unnamed.id, note: 'refund_failed' } : { reason: 'no_refund' }
  }
  await tx.update(refunds).set({ amount: unnamed.amount - event.amount, updatedAt: sql`now()` }).where(eq(refunds.id, unnamed.id))
  // The shopper was told of the whole total already: the part split off is named, not noticed again.
  const id = newId('re')
  await tx.insert(refunds).values({
    id, orderId: order.id, tenantId: order.tenantId, currency: order.currency,
    amount: event.amount, status: failed ? 'failed' : 'succeeded', source: 'provider', reason: null, providerRefundId: event.providerRefundId, settledAt: sql`now()`,
  })
  return failed ? { refundId: id, note: 'refund_failed' } : { reason: 'no_refund' }
}

async function recordProviderTotal(tx: Database, order: LockedOrder, totals: { reportable: number }, total: number, context: PaymentStatusContext): Promise<Settled> {
  if (total > order.amount) return { reason: 'amount_mismatch' }
  const unknown = total - totals.reportable
  if (unknown <= 0) return { reason: 'no_refund' }
  const refundId = await insertRefund(tx, order, { amount: unknown, status: 'succeeded', source: 'provider', reason: null, providerRefundId: null, requestId: context.requestId })
  return { refundId, note: 'refund_at_provider' }
}

/**
 * The refund total an event reported in the order's currency: its own (`payment.refunded`), or the
 * one the provider's status API confirmed for it (a Midtrans refund notification is stored as
 * informational and applied as the API states it; Midtrans lists no refund in flight or failed).
 */
const reportedTotal = (order: LockedOrder) => sql<number | null>`case
  when ${webhookEvents.type} = 'payment.refunded' and ${webhookEvents.currency} = ${order.currency} then ${webhookEvents.amount}
  when ${webhookEvents.confirmation}->>'type' = 'payment.refunded' and ${webhookEvents.confirmation}->>'currency' = ${order.currency} then (${webhookEvents.confirmation}->>'amount')::bigint
end`

/**
 * A refund of ours failed, freeing its hold: what the provider reported while the hold covered it
 * (a dashboard refund that did not fit beside ours) is recorded now, so it is never lost. First the
 * refunds its signed events named and we do not hold, each as its events last left it (failed
 * once any says so); then the largest total it reported, less what that total may count
 * (RefundTotals.reportable): a refund of ours the provider made and then failed is still
 * subtracted, so a total that counted it while it was pending never comes back as the provider's.
 */
async function recordWhatTheHoldCovered(tx: Database, order: LockedOrder, context: PaymentStatusContext): Promise<void> {
  const [words, [reported]] = await Promise.all([
    providerWords(tx, order),
    tx.select({ total: sql<string | null>`max(${reportedTotal(order)})` }).from(webhookEvents)
      .where(and(eq(webhookEvents.orderId, order.id), lte(reportedTotal(order), order.amount))),
  ])
  // An event not applied yet may settle a refund it names here, before its own job does.
  const settled: Settled[] = []
  for (const refund of words.values()) settled.push(await settleNamedRefund(tx, order, await refundTotals(tx, order.id), refund, context))
  if (reported?.total) settled.push(await recordProviderTotal(tx, order, await refundTotals(tx, order.id), Number(reported.total), context))
  for (const change of settled) {
    if (!('refundId' in change)) continue
    await recordHistory(tx, { orderId: order.id, fromStatus: order.status, requestedStatus: null, toStatus: order.status, outcome: 'applied', reason: change.note, refundId: change.refundId }, context)
  }
}

interface NewRefund {
  amount: number
  status: RefundStatus
  source: 'api' | 'provider' | 'automatic'
  reason: string | null
  providerRefundId: string | null
  idempotencyKey?: string
  requestId?: string
}

/** Inserts a refund of the locked order (the caller checked it fits); a pending one gets its payment.refund job. */
export async function insertRefund(tx: Database, order: LockedOrder, refund: NewRefund): Promise<string> {
  const id = newId('re')
  const settledAt = refund.status === 'pending' ? null : sql`now()`
  await tx.insert(refunds).values({ id, orderId: order.id, tenantId: order.tenantId, currency: order.currency, ...refund, settledAt })
  if (refund.status === 'pending') {
    await enqueueJob(tx, paymentRefundJob, { orderId: order.id, refundId: id }, { dedupeKey: id, idempotencyKey: refund.idempotencyKey, requestId: refund.requestId })
  }
  return id
}

/** pending → succeeded | failed (or the provider's id noted while pending); true when the row changed. */
export async function settleRefund(tx: Database, refundId: string, outcome: { status: RefundStatus, providerRefundId?: string | null, failure?: string }): Promise<boolean> {
  const rows = await tx.update(refunds).set({
    status: outcome.status,
    ...(outcome.providerRefundId && { providerRefundId: sql`coalesce(${refunds.providerRefundId}, ${outcome.providerRefundId})` }),
    ...(outcome.failure && { failure: outcome.failure }),
    ...(outcome.status !== 'pending' && { settledAt: sql`now()` }),
    updatedAt: sql`now()`,
  }).where(and(eq(refunds.id, refundId), eq(refunds.status, 'pending'))).returning({ id: refunds.id })
  return rows.length > 0
}

/**
 * Settles one of our refunds with what the provider answered (its job, or reconciliation), under the
 * order's lock, and moves the order with it: the same path a webhook naming the refund takes.
 */
export async function applyRefundOutcome(
  tx: Database,
  orderId: string,
  refundId: string,
  outcome: { status: RefundStatus, providerRefundId?: string | null, failure?: string },
  context: PaymentStatusContext,
): Promise<void> {
  const order = await lockOrder(tx, orderId)
  if (!order) return
  const changed = await settleRefund(tx, refundId, outcome)
  if (!changed || outcome.status === 'pending') return
  if (outcome.status === 'failed') await recordWhatTheHoldCovered(tx, order, context)
  const to = isPaid(order.status) ? statusAfterRefunds(order, (await refundTotals(tx, orderId)).succeeded) : order.status
  await moveTo(tx, order, to, context)
  await recordHistory(tx, {
    orderId, fromStatus: order.status, requestedStatus: null, toStatus: to, outcome: 'applied',
    reason: outcome.status === 'succeeded' ? 'refund_succeeded' : 'refund_failed', refundId,
  }, context)
}

/**
 * The shopper paid an order that was canceled meanwhile: the payment is given back, all of what is
 * not held already, once however often the payment is applied (a unique index on the automatic refund).
 */
async function refundCanceledOrder(tx: Database, order: LockedOrder, context: PaymentStatusContext): Promise<RefundNote | undefined> {
  const [existing] = await tx.select({ id: refunds.id }).from(refunds).where(and(eq(refunds.orderId, order.id), eq(refunds.source, 'automatic')))
  const remaining = order.amount - (await refundTotals(tx, order.id)).held
  if (existing || remaining <= 0) return undefined
  await insertRefund(tx, order, { amount: remaining, status: 'pending', source: 'automatic', reason: 'order_canceled', providerRefundId: null, requestId: context.requestId })
  return 'refund_for_canceled_order'
}

/** The ids of the order's refunds that succeeded: each gets its notice once the order is paid. */
async function succeededRefunds(tx: Database, orderId: string): Promise<string[]> {
  const rows = await queryPrepared(tx, selectSucceededRefunds(tx, { orderId }))
  return rows.map(({ id }) => id as string)
}

// Statements every applied event writes, compiled once (a history row has all its columns bound, unset ones null).
const setOrderStatus = defineStatement<{ id: string, status: string }>(db => db.update(orders)
  .set({ status: sql`${sql.placeholder('status')}`, updatedAt: sql`now()` }).where(eq(orders.id, sql.placeholder('id'))))
const historyColumns = ['orderId', 'fromStatus', 'requestedStatus', 'toStatus', 'outcome', 'reason', 'refundId', 'webhookEventId', 'jobId', 'requestId'] as const
const insertHistory = defineStatement<Record<typeof historyColumns[number], string | null>>(db => db.insert(orderStatusHistory)
  .values(Object.fromEntries(historyColumns.map(name => [name, sql.placeholder(name)])) as never))

/** How a change sends its writes: awaited as they come, or with the COMMIT (PaymentStatusContext.writesAtCommit). */
function writerFor(tx: Database, context: PaymentStatusContext) {
  const atCommit = context.writesAtCommit === true
  return {
    write: (query: DeferrableQuery): PromiseLike<unknown> | undefined => {
      if (!atCommit) return 'text' in query ? queryPrepared(tx, query) : query
      writeAtCommit(tx, query)
      return undefined
    },
    enqueue: atCommit ? enqueueJobAtCommit : enqueueJob,
  }
}

/**
 * Sets the status (when it changed) and enqueues the effects of what was reached, each once; reaching
 * paid commits the order's stock reservations (once: docs/inventory.md#settlement). `succeeded`: the
 * refunds that succeeded, when the caller read them already.
 */
async function moveTo(tx: Database, order: LockedOrder, to: string, context: PaymentStatusContext, succeeded?: string[]): Promise<void> {
  const { write, enqueue } = writerFor(tx, context)
  // None of these statements depends on another: they are sent together (one round trip on postgres.js).
  const statusSet = to !== order.status ? write(setOrderStatus(tx, { id: order.id, status: to })) : undefined
  if (!isPaid(to)) {
    await statusSet
    return
  }
  const paidEffects = !isPaid(order.status) && order.status !== 'canceled'
    ? [orderSendConfirmationJob, orderIssueInvoiceJob].map(type => enqueue(tx, type, { orderId: order.id }, { dedupeKey: order.id, requestId: context.requestId }))
    : []
  // The payment takes the reserved units; a canceled order's were released already, and stay so.
  const stockTaken = !isPaid(order.status) ? write(settlementQuery(tx, { tenantId: order.tenantId, orderId: order.id }, 'commit', null, context)) : undefined
  const [noticed] = await Promise.all([succeeded ?? succeededRefunds(tx, order.id), statusSet, ...paidEffects, stockTaken])
  await Promise.all(noticed.map(id => enqueue(tx, refundSendNoticeJob, { orderId: order.id, refundId: id }, { dedupeKey: id, requestId: context.requestId })))
}

interface HistoryRow {
  orderId: string
  fromStatus: string
  requestedStatus: string | null
  toStatus: string
  outcome: 'applied' | 'ignored'
  reason?: string
  refundId?: string
}

export async function recordHistory(tx: Database, row: HistoryRow, context: PaymentStatusContext): Promise<void> {
  await writerFor(tx, context).write(insertHistory(tx, {
    orderId: row.orderId,
    fromStatus: row.fromStatus,
    requestedStatus: row.requestedStatus,
    toStatus: row.toStatus,
    outcome: row.outcome,
    reason: row.reason ?? null,
    refundId: row.refundId ?? null,
    webhookEventId: context.webhookEventId ?? null,
    jobId: context.jobId ?? null,
    requestId: context.requestId ?? null,
  }))
}
