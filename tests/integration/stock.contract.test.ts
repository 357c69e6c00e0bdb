import { and, asc, eq, sql } from 'drizzle-orm'
import fc from 'fast-check'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type Database, transaction, violatedConstraint } from '@idempotent-checkout/db-kit'
import { newId } from '../../server/db/ids'
import { rowsOf } from '../../server/db/raw-rows'
import { orders, stock, stockMovements, tenants } from '../../server/db/schema'
import { setLogLevel } from '../../server/observability/logger'
import { cancelOrder, expireUnpaidOrders } from '../../server/orders/cancel'
import { applyPaymentStatus } from '../../server/orders/payment-state'
import { planOrder } from '../../server/orders/service'
import { findOrderView } from '../../server/orders/view'
import { problemOf } from '../../server/problems'
import { requestRefund } from '../../server/refunds/service'
import { adjustStock, setStock } from '../../server/stock/service'
import { openMemoryLockBackend, describeOnBothBackends } from '../support/lock-backends'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'

// Stock reserved exactly once (docs/inventory.md) on both databases the app runs on: an order
// reserves in its own statement, all items or none; its reservations are settled once by whatever
// happens to it first; a restocking refund puts back only what was sold, once; the counts always
// equal the ledger's sums.

if (!process.env.LOG_LEVEL) setLogLevel('error')

const UNIT_PRICE = 1000
const CONCURRENT = 12

function stockContract(driver: DatabaseDriver) {
  let database: SuiteDatabase
  let db: Database

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'stock', { poolSize: CONCURRENT + 2 })
    db = database.handle.db
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  let sequence = 0
  async function tenantWith(counts: Record<string, number>): Promise<string> {
    const tenantId = newId('ten')
    await db.insert(tenants).values({ id: tenantId, name: 'stock suite' })
    for (const [sku, onHand] of Object.entries(counts)) await transaction(db, tx => setStock(tx, { tenantId, sku, onHand }, { requestId: 'req_set' }))
    return tenantId
  }

  /** Places an order as POST /api/orders does (the plan's statements in one transaction); the problem when refused. */
  async function placeOrder(tenantId: string, items: Array<{ sku: string, quantity: number }>): Promise<{ orderId: string } | { problem: Record<string, unknown> }> {
    const n = ++sequence
    const lines = items.map(item => ({ ...item, unitPrice: UNIT_PRICE }))
    const plan = planOrder(db, new Date(), { tenantId, idempotencyKey: `key-${n}`, requestId: `req_${n}` }, {
      cartId: `cart-${n}`, currency: 'IDR', amount: lines.reduce((sum, item) => sum + item.quantity * UNIT_PRICE, 0), paymentMethod: 'card', items: lines, customer: { email: 'a@b.co' },
    })
    try {
      await database.handle.transact(plan.statements)
      return { orderId: plan.result.resourceId! }
    }
    catch (error) {
      const constraint = violatedConstraint(error)
      if (constraint === undefined) throw error
      const answer = await plan.onConstraintViolation!(constraint, db).catch((refusal: unknown) => refusal)
      return { problem: problemOf(answer)!.body }
    }
  }

  const counts = async (tenantId: string) => Object.fromEntries((await db.select().from(stock).where(eq(stock.tenantId, tenantId)).orderBy(asc(stock.sku)))
    .map(row => [row.sku, { onHand: row.onHand, reserved: row.reserved }]))

  /** Σ of the ledger per SKU: always what the stock rows say. */
  async function expectLedgerEqualsCounts(tenantId: string) {
    const sums = rowsOf<{ sku: string, on_hand: string, reserved: string }>(await db.execute(sql`select sku, sum(on_hand_delta) as on_hand, sum(reserved_delta) as reserved
      from ${stockMovements} where tenant_id = ${tenantId} group by sku order by sku`))
    const fromLedger = Object.fromEntries(sums.map(row => [row.sku, { onHand: Number(row.on_hand), reserved: Number(row.reserved) }]))
    const stated = await counts(tenantId)
    for (const sku of Object.keys(stated)) expect(fromLedger[sku] ?? { onHand: 0, reserved: 0 }, sku).toEqual(stated[sku])
  }

  const movements = (orderId: string) => db.select({ sku: stockMovements.sku, kind: stockMovements.kind, quantity: stockMovements.quantity, reason: stockMovements.reason })
    .from(stockMovements).where(eq(stockMovements.orderId, orderId)).orderBy(asc(stockMovements.id))

  const pay = (orderId: string) => transaction(db, tx => applyPaymentStatus(tx, orderId, 'paid', { requestId: 'req_paid' }))
  const cancel = (tenantId: string, orderId: string) => transaction(db, tx => cancelOrder(tx, { tenantId, orderId, idempotencyKey: `cancel-${++sequence}`, requestId: 'req_cancel' }))
  const refund = (tenantId: string, orderId: string, input: { amount?: number, restock?: boolean, items?: Array<{ sku: string, quantity: number }> }) => transaction(db, tx =>
    requestRefund(tx, { tenantId, orderId, source: 'api', idempotencyKey: `refund-${++sequence}`, requestId: 'req_refund' }, input))

  it('an order reserves each tracked SKU once, its quantities summed; an untracked SKU reserves nothing', async () => {
    const tenantId = await tenantWith({ TEE: 5, MUG: 3 })
    const placed = await placeOrder(tenantId, [{ sku: 'TEE', quantity: 2 }, { sku: 'POSTER', quantity: 9 }, { sku: 'TEE', quantity: 1 }, { sku: 'MUG', quantity: 3 }])
    expect(placed).toHaveProperty('orderId')
    const { orderId } = placed as { orderId: string }
    expect(await counts(tenantId)).toEqual({ MUG: { onHand: 3, reserved: 3 }, TEE: { onHand: 5, reserved: 3 } })
    expect(await movements(orderId)).toEqual([
      { sku: 'MUG', kind: 'reserve', quantity: 3, reason: null },
      { sku: 'TEE', kind: 'reserve', quantity: 3, reason: null },
    ])
    expect((await findOrderView(db, orderId))!.reservations).toEqual([{ sku: 'MUG', quantity: 3, status: 'reserved' }, { sku: 'TEE', quantity: 3, status: 'reserved' }])
    await expectLedgerEqualsCounts(tenantId)
  })

  it('not enough of one item: nothing is reserved, no order is made, and the problem lists what is short', async () => {
    const tenantId = await tenantWith({ TEE: 5, MUG: 1 })
    const refused = await placeOrder(tenantId, [{ sku: 'TEE', quantity: 2 }, { sku: 'MUG', quantity: 2 }])
    expect(refused).toEqual({ problem: expect.objectContaining({ type: '/problems/insufficient-stock', status: 409, items: [{ sku: 'MUG', requested: 2, available: 1 }] }) })
    expect(await counts(tenantId)).toEqual({ MUG: { onHand: 1, reserved: 0 }, TEE: { onHand: 5, reserved: 0 } })
    expect(await db.select({ id: orders.id }).from(orders).where(eq(orders.tenantId, tenantId))).toEqual([])
  })

  it(`${CONCURRENT} shoppers race for 5 units: exactly 5 orders, the rest refused, never oversold`, async () => {
    const tenantId = await tenantWith({ LAST: 5 })
    const results = await Promise.all(Array.from({ length: CONCURRENT }, () => placeOrder(tenantId, [{ sku: 'LAST', quantity: 1 }])))
    expect(results.filter(result => 'orderId' in result)).toHaveLength(5)
    expect(results.filter(result => 'problem' in result).map(result => (result as { problem: { type: string } }).problem.type))
      .toEqual(Array.from({ length: CONCURRENT - 5 }, () => '/problems/insufficient-stock'))
    expect(await counts(tenantId)).toEqual({ LAST: { onHand: 5, reserved: 5 } })
    await expectLedgerEqualsCounts(tenantId)
  })

  it('paid commits, canceled releases, each once whichever comes first and however often', async () => {
    const tenantId = await tenantWith({ TEE: 10 })
    const { orderId: paid } = await placeOrder(tenantId, [{ sku: 'TEE', quantity: 2 }]) as { orderId: string }
    const { orderId: canceled } = await placeOrder(tenantId, [{ sku: 'TEE', quantity: 3 }]) as { orderId: string }
    await Promise.all([pay(paid), pay(paid), cancel(tenantId, canceled), cancel(tenantId, canceled)])
    // A payment that arrives for the canceled order takes nothing: its units are back on sale.
    await pay(canceled)
    expect(await counts(tenantId)).toEqual({ TEE: { onHand: 8, reserved: 0 } })
    expect(await movements(paid)).toEqual([{ sku: 'TEE', kind: 'reserve', quantity: 2, reason: null }, { sku: 'TEE', kind: 'commit', quantity: 2, reason: null }])
    expect(await movements(canceled)).toEqual([{ sku: 'TEE', kind: 'reserve', quantity: 3, reason: null }, { sku: 'TEE', kind: 'release', quantity: 3, reason: 'canceled' }])
    expect((await findOrderView(db, canceled))!).toMatchObject({ cancelReason: 'requested', reservations: [{ sku: 'TEE', quantity: 3, status: 'released' }] })
    await expectLedgerEqualsCounts(tenantId)
  })

  it('an unpaid order past its TTL expires once, releasing its units; its payment arriving in the same moment takes nothing', async () => {
    const tenantId = await tenantWith({ MUG: 4 })
    const { orderId } = await placeOrder(tenantId, [{ sku: 'MUG', quantity: 4 }]) as { orderId: string }
    await db.update(orders).set({ createdAt: sql`now() - interval '1 hour'` }).where(eq(orders.id, orderId))
    const locks = openMemoryLockBackend().locks
    await Promise.all([
      expireUnpaidOrders(db, locks, { ttlSeconds: 1800, limit: 10 }),
      pay(orderId),
      expireUnpaidOrders(db, openMemoryLockBackend().locks, { ttlSeconds: 1800, limit: 10 }),
    ])
    const settled = (await movements(orderId)).filter(movement => movement.kind !== 'reserve')
    expect(settled).toHaveLength(1)
    const [order] = await db.select({ status: orders.status, cancelReason: orders.cancelReason }).from(orders).where(eq(orders.id, orderId))
    if (settled[0]!.kind === 'commit') {
      expect(order).toEqual({ status: 'paid', cancelReason: null })
      expect(await counts(tenantId)).toEqual({ MUG: { onHand: 0, reserved: 0 } })
    }
    else {
      expect(settled[0]).toEqual({ sku: 'MUG', kind: 'release', quantity: 4, reason: 'expired' })
      // The late payment moved the canceled order on (and is refunded automatically); its units stay on sale.
      expect(order!.cancelReason).toBe('expired')
      expect(await counts(tenantId)).toEqual({ MUG: { onHand: 4, reserved: 0 } })
    }
    await expectLedgerEqualsCounts(tenantId)
  })

  it('a restocking refund puts back what was sold, once: named items, then the rest; more is 409 restock-exceeds-committed', async () => {
    const tenantId = await tenantWith({ TEE: 10, MUG: 10 })
    const { orderId } = await placeOrder(tenantId, [{ sku: 'TEE', quantity: 3 }, { sku: 'MUG', quantity: 1 }, { sku: 'POSTER', quantity: 1 }]) as { orderId: string }
    await pay(orderId)
    expect(await counts(tenantId)).toEqual({ MUG: { onHand: 9, reserved: 0 }, TEE: { onHand: 7, reserved: 0 } })
    await refund(tenantId, orderId, { amount: 1000, restock: true, items: [{ sku: 'TEE', quantity: 1 }] })
    const over = await refund(tenantId, orderId, { amount: 1000, restock: true, items: [{ sku: 'TEE', quantity: 3 }] }).catch((error: unknown) => problemOf(error)!.body)
    expect(over).toMatchObject({ type: '/problems/restock-exceeds-committed', restockable: [{ sku: 'MUG', quantity: 1 }, { sku: 'TEE', quantity: 2 }] })
    await refund(tenantId, orderId, { restock: true })
    expect(await counts(tenantId)).toEqual({ MUG: { onHand: 10, reserved: 0 }, TEE: { onHand: 10, reserved: 0 } })
    // Nothing sold is left to put back.
    const none = await refund(tenantId, orderId, { amount: 1, restock: true }).catch((error: unknown) => problemOf(error)!.body)
    expect(none).toMatchObject({ type: '/problems/refund-exceeds-remaining' })
    await expectLedgerEqualsCounts(tenantId)
  })

  it('a count set by hand and an adjustment are ledger rows; neither may go below what orders hold', async () => {
    const tenantId = await tenantWith({ TEE: 5 })
    await placeOrder(tenantId, [{ sku: 'TEE', quantity: 4 }])
    const below = await transaction(db, tx => setStock(tx, { tenantId, sku: 'TEE', onHand: 3 }, {})).catch((error: unknown) => problemOf(error)!.body)
    expect(below).toMatchObject({ type: '/problems/stock-below-reserved', onHand: 5, reserved: 4 })
    const lost = await transaction(db, tx => adjustStock(tx, { tenantId, sku: 'TEE', delta: -2, reason: 'damaged' }, {})).catch((error: unknown) => problemOf(error)!.body)
    expect(lost).toMatchObject({ type: '/problems/stock-below-reserved' })
    await transaction(db, tx => adjustStock(tx, { tenantId, sku: 'TEE', delta: 7, reason: 'received' }, {}))
    await transaction(db, tx => setStock(tx, { tenantId, sku: 'TEE', onHand: 10 }, {}))
    expect(await counts(tenantId)).toEqual({ TEE: { onHand: 10, reserved: 4 } })
    const kinds = await db.select({ kind: stockMovements.kind, onHandDelta: stockMovements.onHandDelta, reason: stockMovements.reason }).from(stockMovements)
      .where(and(eq(stockMovements.tenantId, tenantId), sql`${stockMovements.kind} in ('set', 'adjust')`)).orderBy(asc(stockMovements.id))
    expect(kinds).toEqual([{ kind: 'set', onHandDelta: 5, reason: null }, { kind: 'adjust', onHandDelta: 7, reason: 'received' }, { kind: 'set', onHandDelta: -2, reason: null }])
    await expectLedgerEqualsCounts(tenantId)
  })

  it('any interleaving of pay, cancel, expire and restocking refunds: each reservation settled at most once, counts = ledger, never below zero', async () => {
    const step = fc.constantFrom('pay', 'cancel', 'expire', 'refund', 'refund-some')
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), fc.boolean(), async (steps, concurrently) => {
      const tenantId = await tenantWith({ A: 3, B: 2 })
      const { orderId } = await placeOrder(tenantId, [{ sku: 'A', quantity: 2 }, { sku: 'B', quantity: 1 }]) as { orderId: string }
      await db.update(orders).set({ createdAt: sql`now() - interval '1 hour'` }).where(eq(orders.id, orderId))
      const run = (name: string) => {
        if (name === 'pay') return pay(orderId)
        if (name === 'cancel') return cancel(tenantId, orderId).catch(() => undefined)
        if (name === 'expire') return expireUnpaidOrders(db, openMemoryLockBackend().locks, { ttlSeconds: 60, limit: 100 })
        return refund(tenantId, orderId, { amount: 100, restock: true, ...(name === 'refund-some' && { items: [{ sku: 'A', quantity: 1 }] }) }).catch(() => undefined)
      }
      if (concurrently) await Promise.all(steps.map(run))
      else for (const name of steps) await run(name)
      const rows = await movements(orderId)
      for (const sku of ['A', 'B']) {
        const of = rows.filter(row => row.sku === sku)
        expect(of.filter(row => row.kind === 'commit' || row.kind === 'release').length).toBeLessThanOrEqual(1)
        const committed = of.filter(row => row.kind === 'commit').reduce((sum, row) => sum + row.quantity, 0)
        const restocked = of.filter(row => row.kind === 'restock').reduce((sum, row) => sum + row.quantity, 0)
        expect(restocked).toBeLessThanOrEqual(committed)
      }
      const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
      const settlements = rows.filter(row => row.kind === 'commit' || row.kind === 'release').map(row => row.kind)
      // A paid order took its units; a canceled one gave them back (a payment after that takes none).
      if (settlements.length > 0) expect(new Set(settlements).size).toBe(1)
      if (order!.status === 'pending_payment') expect(settlements).toEqual([])
      const now = await counts(tenantId)
      for (const sku of ['A', 'B'] as const) {
        expect(now[sku]!.reserved).toBeGreaterThanOrEqual(0)
        expect(now[sku]!.reserved).toBeLessThanOrEqual(now[sku]!.onHand)
      }
      await expectLedgerEqualsCounts(tenantId)
    }), { numRuns: driver === 'postgres' ? 40 : 15 })
  }, 120_000)
}

describeOnBothBackends('stock contract', stockContract)
