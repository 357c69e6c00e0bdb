import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'

// Unpaid orders expire (docs/inventory.md#unpaid-orders-expire) against the built server on real
// Postgres and Redis, with ORDER_PAYMENT_TTL_SECONDS=1: the expiry run on demand and the shopper's
// payment at mockpay in the same second, ten times with fresh orders, the expiry started a little
// later each time (from 40 ms before the payment to 320 ms after). Whichever comes first settles
// the reservation, once (docs/inventory.md#settlement): a commit if the payment won; a release
// (reason expired) if the expiry won, and then a payment that still went through is refunded
// automatically. Then a restocking refund replayed under its key puts its units back once
// (docs/inventory.md#restock-on-refund).

const unitPrice = 75_000
const rounds = 10
/**
 * How much later than the payment round n starts the expiry (negative: earlier). The payment is
 * applied by the worker tens of milliseconds after its confirm, so the rounds cross over from the
 * expiry winning to the payment winning.
 */
const expiryLagMs = (round: number) => round * 40 - 40

describeWithServices('stock of unpaid orders that expire while they are paid', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    stack = await startOrdersStack('stock-expiry', { ...fastJobsEnv, ORDER_PAYMENT_TTL_SECONDS: '1', MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' })
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  const auth = () => ({ authorization: `Bearer ${stack.tenant.secretKey}` })
  const readOrder = async (orderId: string) => {
    const read = await request(stack.app.url, `/api/orders/${orderId}`, { headers: auth() })
    expect(read.status, read.text).toBe(200)
    return read.json
  }

  async function setStock(sku: string, onHand: number): Promise<void> {
    const set = await request(stack.app.url, `/api/inventory/${sku}`, { method: 'PUT', headers: auth(), body: { onHand } })
    expect(set.status, set.text).toBe(200)
  }

  /** An order of `quantity` units of `sku`, once the worker created its payment at mockpay. */
  async function placeOrder(sku: string, quantity: number): Promise<{ orderId: string, intentId: string, createdAt: number }> {
    const created = await postOrder(stack.app.url, {
      secretKey: stack.tenant.secretKey,
      key: newIdempotencyKey(),
      body: validOrderBody({ amount: quantity * unitPrice, items: [{ sku, quantity, unitPrice }] }),
    })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    let intentId: string | null = null
    await pollUntil(`order ${orderId} has a payment intent`, async () => Boolean(intentId = (await readOrder(orderId)).paymentIntentId), { timeoutMs: 20_000, intervalMs: 50 })
    return { orderId, intentId: intentId!, createdAt: Date.parse(created.json.createdAt) }
  }

  const confirm = (intentId: string): Promise<TestResponse> =>
    request(stack.app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } } })

  /** The order's jobs (its own, and mockpay's deliveries of its events) all done, and every stored event processed. */
  async function settled(orderId: string): Promise<boolean> {
    const [row] = await stack.sql<[{ open: number, received: number }]>`
      select (select count(*)::int from jobs where (resource_id = ${`order:${orderId}`} or (kind = 'mockpay.deliver' and payload->>'orderId' = ${orderId}))
                and status <> 'completed') as open,
             (select count(*)::int from webhook_events where order_id = ${orderId} and status = 'received') as received`
    return row.open === 0 && row.received === 0
  }

  const movementsOf = (orderId: string) => stack.sql<Array<{ kind: string, quantity: number, reason: string | null }>>`
    select kind, quantity::int as quantity, reason from stock_movements where order_id = ${orderId} order by id`

  const refundsOf = (orderId: string) => stack.sql<Array<{ source: string, status: string, amount: number }>>`
    select source, status, amount::int as amount from refunds where order_id = ${orderId} order by created_at, id`

  /** The counts as GET /api/inventory/:sku answers them, and the same as the sums of the SKU's movements. */
  async function countsOf(sku: string): Promise<{ onHand: number, reserved: number }> {
    const read = await request(stack.app.url, `/api/inventory/${sku}`, { headers: auth() })
    expect(read.status, read.text).toBe(200)
    const counts = { onHand: read.json.onHand, reserved: read.json.reserved }
    const [sums] = await stack.sql<[{ onHand: number, reserved: number }]>`
      select sum(on_hand_delta)::int as "onHand", sum(reserved_delta)::int as reserved from stock_movements
      where tenant_id = ${stack.tenant.tenantId} and sku = ${sku}`
    expect(sums, `the ledger's sums of ${sku}`).toEqual(counts)
    return counts
  }

  it(`the expiry and the payment in the same second, ${rounds} times: each reservation settled once, by whichever came first`, async () => {
    const sku = 'EXPIRY-TEE'
    const onHand = 2 * rounds
    await setStock(sku, onHand)
    const outcomes: Array<{ round: number, expiryLagMs: number, winner: string, paidAtMockpay: boolean, status: string }> = []
    for (let round = 0; round < rounds; round++) {
      const { orderId, intentId, createdAt } = await placeOrder(sku, 2)
      // Past its TTL of one second: the next expiry run takes it unless its payment is applied first.
      await sleep(Math.max(0, createdAt + 1_100 - Date.now()))
      const lag = expiryLagMs(round)
      const [paid, expiry] = await Promise.all([
        sleep(Math.max(0, -lag)).then(() => confirm(intentId)),
        sleep(Math.max(0, lag)).then(() => opsRequest(stack.app.url, '/api/ops/tasks/orders:expire', { method: 'POST' })),
      ])
      expect(expiry.status, expiry.text).toBe(200)
      // The cancel of an expired order may reach mockpay first: then the shopper could not pay.
      const paidAtMockpay = paid.status === 200
      if (!paidAtMockpay) expectProblem(paid, 'payment-state-conflict')

      let order: any
      await pollUntil(`order ${orderId} settled`, async () => {
        order = await readOrder(orderId)
        return order.status !== 'pending_payment' && await settled(orderId) && (await refundsOf(orderId)).every(refund => refund.status !== 'pending')
      }, { timeoutMs: 20_000, intervalMs: 100 })

      const movements = await movementsOf(orderId)
      const settlement = movements.filter(movement => movement.kind !== 'reserve')
      expect(movements[0], `order ${orderId}`).toEqual({ kind: 'reserve', quantity: 2, reason: null })
      // Exactly one settlement, whoever won.
      expect(settlement, `order ${orderId}`).toHaveLength(1)
      expect(movements, `order ${orderId}`).toHaveLength(2)
      if (settlement[0]!.kind === 'commit') {
        expect(paidAtMockpay).toBe(true)
        expect(settlement[0]).toEqual({ kind: 'commit', quantity: 2, reason: null })
        expect(order).toMatchObject({ status: 'paid', cancelReason: null, reservations: [{ sku, quantity: 2, status: 'committed' }] })
        expect(await refundsOf(orderId)).toEqual([])
      }
      else {
        expect(settlement[0]).toEqual({ kind: 'release', quantity: 2, reason: 'expired' })
        // A payment that went through anyway is given back, once, by itself; the units stay on sale.
        expect(order).toMatchObject({ status: paidAtMockpay ? 'refunded' : 'canceled', cancelReason: 'expired', reservations: [{ sku, quantity: 2, status: 'released' }] })
        expect(await refundsOf(orderId)).toEqual(paidAtMockpay ? [{ source: 'automatic', status: 'succeeded', amount: 2 * unitPrice }] : [])
      }
      outcomes.push({ round, expiryLagMs: lag, winner: settlement[0]!.kind === 'commit' ? 'payment' : 'expiry', paidAtMockpay, status: order.status })
    }
    console.log('\nExpiry racing the payment, by round (the expiry started expiryLagMs after the payment):')
    console.table(outcomes)

    const committed = outcomes.filter(outcome => outcome.winner === 'payment').length
    expect(await countsOf(sku)).toEqual({ onHand: onHand - 2 * committed, reserved: 0 })
  })

  it('a restocking refund replayed under its key puts its units back once; more than the payment took is 409 restock-exceeds-committed', async () => {
    const sku = 'RESTOCK-MUG'
    await setStock(sku, 5)
    const { orderId, intentId } = await placeOrder(sku, 2)
    // Kept from expiring: this test is about the refund, not the race.
    await stack.sql`update orders set created_at = now() + interval '1 hour' where id = ${orderId}`
    expect((await confirm(intentId)).status).toBe(200)
    await pollUntil(`order ${orderId} is paid`, async () => (await readOrder(orderId)).status === 'paid', { timeoutMs: 20_000, intervalMs: 100 })
    expect(await countsOf(sku)).toEqual({ onHand: 3, reserved: 0 })

    const key = newIdempotencyKey()
    const restockOne = () => request(stack.app.url, `/api/orders/${orderId}/refunds`, {
      method: 'POST',
      headers: { ...auth(), 'idempotency-key': key },
      body: { amount: unitPrice, restock: true, items: [{ sku, quantity: 1 }] },
    })
    const first = await restockOne()
    expect(first.status, first.text).toBe(201)
    // Retried twice at once and once more later: the same refund, replayed.
    const replays = [...await Promise.all([restockOne(), restockOne()]), await restockOne()]
    expect(replays.map(replay => [replay.status, replay.json.id, replay.json.idempotency.replayed])).toEqual(replays.map(() => [201, first.json.id, true]))
    expect(await countsOf(sku)).toEqual({ onHand: 4, reserved: 0 })
    expect(await movementsOf(orderId)).toEqual([
      { kind: 'reserve', quantity: 2, reason: null },
      { kind: 'commit', quantity: 2, reason: null },
      { kind: 'restock', quantity: 1, reason: null },
    ])

    // One unit sold is left to put back: two is more.
    const over = await request(stack.app.url, `/api/orders/${orderId}/refunds`, {
      method: 'POST',
      headers: { ...auth(), 'idempotency-key': newIdempotencyKey() },
      body: { amount: unitPrice, restock: true, items: [{ sku, quantity: 2 }] },
    })
    expectProblem(over, 'restock-exceeds-committed')
    expect(over.json.restockable).toEqual([{ sku, quantity: 1 }])
    expect(await countsOf(sku)).toEqual({ onHand: 4, reserved: 0 })
    expect((await refundsOf(orderId)).map(refund => refund.source)).toEqual(['api'])
  })
})
