import { eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import { ledgerDiscrepancies, operatorActions, orders, paymentIntentRefunds, paymentIntents, refunds } from '../../server/db/schema'
import { newId } from '../../server/db/ids'
import { runLedgerCheck } from '../../server/ledger/check'
import { AGREED_AT_LATER_CHECK, recordFindings, refreshOpenGauge, resolveDiscrepancy } from '../../server/ledger/discrepancies'
import { createMockpayLedgerReader } from '../../server/ledger/providers/mockpay'
import { setLogLevel } from '../../server/observability/logger'
import type { LedgerView } from '../../shared/ops-api'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { seedOrders } from '../support/jobs'
import { type LockBackend, openMemoryLockBackend } from '../support/lock-backends'
import { describeWithServices } from '../support/services'

// The ledger check's store and one run against mockpay's ledger (which mockpay keeps in the app's
// database), on both drivers: one open discrepancy per (order, kind) however many checks record it
// at once, resolved by a later check that finds the ledgers agreeing or by an operator (audited),
// and a refund made only at the provider recorded once however often the check runs.

if (!process.env.LOG_LEVEL) setLogLevel('error')

const ours: LedgerView = { status: 'pending_payment', currency: 'IDR', captured: 0, refunded: 0, refunds: [] }
const theirs: LedgerView = { status: 'succeeded', currency: 'IDR', captured: 120_000, refunded: 0, refunds: [] }
const wrongAmount = { kind: 'wrong_amount_captured' as const, summary: 'The provider received IDR 120,000 for an order of IDR 150,000 (pending_payment); nothing gave it back.' }

function ledgerContract(driver: DatabaseDriver) {
  let database: SuiteDatabase
  let handle: DatabaseHandle
  let db: Database
  let locks: LockBackend

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'ledger', { poolSize: 8 })
    handle = database.handle
    db = handle.db
    locks = openMemoryLockBackend()
  }, 60_000)

  afterAll(async () => {
    await locks?.close()
    await database?.close()
  })

  const openOf = (orderId: string) => db.select().from(ledgerDiscrepancies).where(eq(ledgerDiscrepancies.orderId, orderId)).orderBy(ledgerDiscrepancies.createdAt, ledgerDiscrepancies.id)

  it('twenty checks recording the same finding at once open one discrepancy; a check that no longer finds it resolves it; found again, it opens anew', async () => {
    const { tenantId, orderIds: [orderId] } = await seedOrders(db, 1)
    const order = { id: orderId!, tenantId, provider: 'mockpay' }
    const recorded = await Promise.all(Array.from({ length: 20 }, () => recordFindings(db, order, [wrongAmount], ours, theirs)))
    expect(recorded.reduce((total, counts) => total + counts.opened, 0)).toBe(1)
    expect((await openOf(orderId!)).map(row => [row.kind, row.status, row.summary, row.ours, row.theirs])).toEqual([['wrong_amount_captured', 'open', wrongAmount.summary, ours, theirs]])

    expect(await recordFindings(db, order, [], ours, { ...theirs, captured: 0 })).toEqual({ opened: 0, resolved: 1 })
    expect((await openOf(orderId!)).map(row => [row.status, row.resolution, row.resolvedBy])).toEqual([['resolved', AGREED_AT_LATER_CHECK, null]])

    expect(await recordFindings(db, order, [wrongAmount], ours, theirs)).toEqual({ opened: 1, resolved: 0 })
    expect((await openOf(orderId!)).map(row => row.status)).toEqual(['resolved', 'open'])
  })

  it('an operator resolves an open discrepancy once, audited in the same transaction; it stays resolved while both ledgers stand as they were, and opens anew when one changes', async () => {
    const { tenantId, orderIds: [orderId] } = await seedOrders(db, 1)
    const order = { id: orderId!, tenantId, provider: 'mockpay' }
    await recordFindings(db, order, [wrongAmount], ours, theirs)
    const [open] = await openOf(orderId!)
    expect(await refreshOpenGauge(db)).toMatchObject({ wrong_amount_captured: (await db.select().from(ledgerDiscrepancies).where(eq(ledgerDiscrepancies.status, 'open'))).length })

    const resolution = { note: 'Refunded the difference at the provider.', operator: 'dana' }
    const outcome = await resolveDiscrepancy(db, { requestId: 'req_resolve' }, open!.id, resolution)
    expect(outcome).toEqual({ resolved: expect.objectContaining({ id: open!.id, status: 'resolved', resolution: resolution.note, resolvedBy: 'dana', resolvedAt: expect.any(Date) }) })
    expect(await resolveDiscrepancy(db, { requestId: 'req_again' }, open!.id, resolution)).toEqual({ refused: expect.objectContaining({ id: open!.id, status: 'resolved', resolvedBy: 'dana' }) })
    expect(await resolveDiscrepancy(db, { requestId: 'req_unknown' }, 'ldg_unknown', resolution)).toEqual({ refused: undefined })
    expect(await db.select({ action: operatorActions.action, tenantId: operatorActions.tenantId, requestId: operatorActions.requestId, detail: operatorActions.detail })
      .from(operatorActions).where(eq(operatorActions.subjectId, open!.id))).toEqual([{
      action: 'ledger_discrepancy.resolved', tenantId, requestId: 'req_resolve',
      detail: { orderId, kind: 'wrong_amount_captured', note: resolution.note, operator: 'dana' },
    }])

    expect(await recordFindings(db, order, [wrongAmount], ours, theirs)).toEqual({ opened: 0, resolved: 0 })
    expect((await openOf(orderId!)).map(row => row.status)).toEqual(['resolved'])
    expect(await recordFindings(db, order, [wrongAmount], ours, { ...theirs, captured: 130_000 })).toEqual({ opened: 1, resolved: 0 })
    expect((await openOf(orderId!)).map(row => row.status)).toEqual(['resolved', 'open'])
  })

  it('a refund made only at mockpay is recorded once, with its notice enqueued, however often the check runs', async () => {
    const { orderIds: [orderId] } = await seedOrders(db, 1)
    const intentId = newId('pi')
    await db.insert(paymentIntents).values({ id: intentId, provider: 'mockpay', idempotencyToken: `order:${orderId}:payment`, orderId: orderId!, amount: 150_000, currency: 'IDR', status: 'succeeded', amountRefunded: 30_000 })
    await db.insert(paymentIntentRefunds).values({ id: 'mre_dashboard', intentId, amount: 30_000 })
    await db.update(orders).set({ status: 'paid', paymentIntentId: intentId, paymentProvider: 'mockpay', updatedAt: sql`now() - interval '1 minute'` }).where(eq(orders.id, orderId!))
    const check = () => runLedgerCheck({ handle, locks: locks.locks, reader: createMockpayLedgerReader(db), days: 7, settleSeconds: 30 })

    const first = await check()
    expect(first).toMatchObject({ skipped: false, counts: { refundsRecorded: 1, refundsFailed: 0, discrepanciesOpened: 0, notCompared: 0 } })
    const recorded = await db.select({ amount: refunds.amount, status: refunds.status, source: refunds.source, providerRefundId: refunds.providerRefundId }).from(refunds).where(eq(refunds.orderId, orderId!))
    expect(recorded).toEqual([{ amount: 30_000, status: 'succeeded', source: 'provider', providerRefundId: 'mre_dashboard' }])
    const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId!))
    expect(order).toEqual({ status: 'partially_refunded' })
    const notices = await db.execute(sql`select count(*)::int as count from jobs where kind = 'order.send_refund_notice' and resource_id = ${`order:${orderId}`}`)
    expect(Array.isArray(notices) ? notices[0] : (notices as unknown as { rows: unknown[] }).rows[0]).toEqual({ count: 1 })

    // The refund just recorded changed within the settle window: the order waits; once it settles, the check agrees.
    expect(await check()).toMatchObject({ skipped: false, counts: { refundsRecorded: 0 } })
    await db.update(refunds).set({ updatedAt: sql`now() - interval '1 minute'` }).where(eq(refunds.orderId, orderId!))
    await db.update(orders).set({ updatedAt: sql`now() - interval '1 minute'` }).where(eq(orders.id, orderId!))
    expect(await check()).toMatchObject({ skipped: false, counts: { refundsRecorded: 0, discrepanciesOpened: 0, notCompared: 0 } })
    expect(await db.select({ id: refunds.id }).from(refunds).where(eq(refunds.orderId, orderId!))).toHaveLength(1)
  })
}

describeWithServices('the ledger check\'s store and run: Postgres', ['postgres'], () => {
  ledgerContract('postgres')
})
describe('the ledger check\'s store and run: PGlite', () => {
  ledgerContract('pglite')
})
