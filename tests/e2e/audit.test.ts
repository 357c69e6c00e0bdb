import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { newId } from '../../server/db/ids'
import { fastJobsEnv, stopAll } from '../support/app'
import { request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, type OrderBody, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'
import type { ExactlyOnceViolation } from '../../shared/ops-api'

// docs/operations.md#evidence-and-audit: GET /api/ops/audit/duplicates against the built server on
// real Postgres: empty while every order is its own intent; the incident's near-duplicate (one
// customer, one amount, two carts minutes apart) and keys replayed too often listed as suspects,
// still healthy; and, with a constraint dropped on purpose in the test database, rows that break
// exactly-once reported as violations, unhealthy: side effects, orders and events, then refunds
// (one key twice, more than the order's amount held, a provider refund made twice or above the
// payment), then the stock ledger (a reservation settled twice, counts that are not the ledger's
// sums). An order refunded in two parts, through mockpay and the worker, stays healthy. The
// tests run in order and build on each other's rows.

const healthy = { healthy: true, window: { minutes: 10 }, exactlyOnceViolations: [], suspects: { businessDuplicates: [], frequentReplays: [] } }

describeWithServices('GET /api/ops/audit/duplicates', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  /** The violations planted by the first test that breaks exactly-once; they stay for the next. */
  let planted: ExactlyOnceViolation[] = []

  beforeAll(async () => {
    // The worker and a calm mockpay, for the order refunded for real.
    stack = await startOrdersStack('audit', { ...fastJobsEnv, MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' })
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  const sql = () => stack.sql
  const audit = async (query = '') => {
    const response = await opsRequest(stack.app.url, `/api/ops/audit/duplicates${query}`)
    expect(response.status, response.text).toBe(200)
    return response.json
  }

  async function order(body: OrderBody, key = newIdempotencyKey()): Promise<{ id: string, key: string, cartId: string }> {
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key, body })
    expect(created.status, created.text).toBe(201)
    return { id: created.json.id, key, cartId: body.cartId }
  }

  const createdAt = async (orderId: string): Promise<string> => {
    const [row] = await sql()<[{ createdAt: Date }]>`select created_at as "createdAt" from orders where id = ${orderId}`
    return row.createdAt.toISOString()
  }

  it('is empty while each order is its own intent: other customers, other amounts, retries replayed', async () => {
    const customer = `healthy-${randomUUID()}@example.com`
    const first = await order(validOrderBody({ customer: { email: customer } }))
    // The same customer again with another amount, and another customer with the same amount.
    await order(validOrderBody({ customer: { email: customer }, amount: 225_000, items: [{ sku: 'SKU-1', quantity: 3, unitPrice: 75_000 }] }))
    await order(validOrderBody({ customer: { email: `other-${randomUUID()}@example.com` } }))
    // A retry of the first is replayed, not a second order.
    const body = validOrderBody({ customer: { email: customer }, cartId: first.cartId })
    const replayed = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: first.key, body })
    expect(replayed.json.idempotency).toEqual({ key: first.key, replayed: true })

    expect(await audit()).toEqual(healthy)
  })

  it('lists the incident as a suspect, still healthy: one customer, one amount, two carts within the window; a wider gap only with a wider window', async () => {
    const email = `twice-${randomUUID()}@example.com`
    const first = await order(validOrderBody({ customer: { email } }))
    // A second cart, a second key, the same shopper (the address in other case) and amount.
    const second = await order(validOrderBody({ customer: { email: email.toUpperCase() } }))

    const reported = {
      tenantId: stack.tenant.tenantId,
      customerEmail: email,
      amount: 150_000,
      currency: 'IDR',
      orders: [
        { id: first.id, cartId: first.cartId, createdAt: await createdAt(first.id) },
        { id: second.id, cartId: second.cartId, createdAt: await createdAt(second.id) },
      ],
    }
    // A shopper may buy the same thing twice: a suspect for a human, not an exactly-once violation.
    expect(await audit()).toEqual({ ...healthy, suspects: { businessDuplicates: [reported], frequentReplays: [] } })

    // Thirty minutes apart they are two purchases for a 10-minute window, a duplicate for a 60-minute one.
    await sql()`update orders set created_at = created_at - interval '30 minutes' where id = ${first.id}`
    expect(await audit()).toEqual(healthy)
    const wider = await audit('?windowMinutes=60')
    expect(wider.window).toEqual({ minutes: 60 })
    expect(wider).toEqual({
      ...healthy,
      window: { minutes: 60 },
      suspects: { businessDuplicates: [{ ...reported, orders: [{ ...reported.orders[0], createdAt: await createdAt(first.id) }, reported.orders[1]] }], frequentReplays: [] },
    })
  })

  it('lists keys replayed at least replayThreshold times as suspects, still healthy', async () => {
    const body = validOrderBody({ customer: { email: `loop-${randomUUID()}@example.com` } })
    const looping = await order(body)
    for (let replay = 0; replay < 3; replay++) {
      const again = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: looping.key, body })
      expect(again.headers.get('idempotent-replayed')).toBe('true')
    }
    // The first replay of the key this minute has its row; the next ones are counted.
    await pollUntil('the replays are logged', async () => {
      const [row] = await sql()<[{ n: number }]>`select (select count(*) from request_log where idempotency_key = ${looping.key} and outcome = 'replay')
        + (select coalesce(sum(replays), 0) from request_log_replays where idempotency_key = ${looping.key}) as n`
      return Number(row.n) === 3
    })
    const scope = `tenant:${stack.tenant.tenantId}`
    expect(await audit('?replayThreshold=3')).toEqual({ ...healthy, suspects: { businessDuplicates: [], frequentReplays: [{ scope, key: looping.key, replays: 3 }] } })
    expect(await audit('?replayThreshold=4')).toEqual(healthy)
    expect(await audit()).toEqual(healthy)
  })

  it('stays healthy when a paid order is refunded in two parts: two notices with one subject, each with its own marker', async () => {
    const paid = await order(validOrderBody({ customer: { email: `refunded-${randomUUID()}@example.com` } }))
    const auth = { authorization: `Bearer ${stack.tenant.secretKey}` }
    const readOrder = async () => (await request(stack.app.url, `/api/orders/${paid.id}`, { headers: auth })).json
    let intentId: string | null = null
    await pollUntil('the worker created the payment intent', async () => Boolean(intentId = (await readOrder()).paymentIntentId))
    const confirmed = await request(stack.app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed' } })
    expect(confirmed.status, confirmed.text).toBe(200)
    await pollUntil('the order is paid', async () => (await readOrder()).status === 'paid')
    const refund = (key: string): Promise<TestResponse> =>
      request(stack.app.url, `/api/orders/${paid.id}/refunds`, { method: 'POST', headers: { ...auth, 'idempotency-key': key }, body: { amount: 60_000 } })
    for (const key of [newIdempotencyKey(), newIdempotencyKey()]) expect((await refund(key)).status).toBe(201)
    const subject = `Part of order ${paid.id} refunded`
    await pollUntil('both refund notices are sent', async () =>
      (await sql()`select 1 from mailbox where order_id = ${paid.id} and subject = ${subject}`).length === 2)

    expect(await audit()).toEqual(healthy)
  })

  it('reports rows that break exactly-once once the constraints that forbid them are gone', async () => {
    const victim = await order(validOrderBody({ customer: { email: `broken-${randomUUID()}@example.com` } }))
    const tenantId = stack.tenant.tenantId
    // Break the fences on purpose: what the audit exists to notice if it ever happened.
    await sql()`alter table side_effects drop constraint side_effects_order_effect_unique`
    await sql()`alter table orders drop constraint orders_tenant_cart_unique`
    await sql()`insert into side_effects (order_id, effect, job_id) values (${victim.id}, 'invoice', 'job_a'), (${victim.id}, 'invoice', 'job_b')`
    await sql()`insert into invoices (id, tenant_id, order_id, amount, currency) values
      (${newId('inv')}, ${tenantId}, ${victim.id}, 150000, 'IDR'), (${newId('inv')}, ${tenantId}, ${victim.id}, 150000, 'IDR')`
    const subject = `Order ${victim.id} confirmed`
    await sql()`insert into mailbox (id, tenant_id, order_id, "to", subject, body) values
      (${newId('msg')}, ${tenantId}, ${victim.id}, 'x@example.com', ${subject}, 'one'), (${newId('msg')}, ${tenantId}, ${victim.id}, 'x@example.com', ${subject}, 'two')`
    // A second order under the victim's cart and key (another customer and amount: not a business duplicate).
    const twin = newId('ord')
    await sql()`insert into orders (id, tenant_id, cart_id, currency, amount, payment_method, items, customer, idempotency_key, request_id, created_at)
      values (${twin}, ${tenantId}, ${victim.cartId}, 'IDR', 1, 'card', ${sql().json([{ sku: 'X', quantity: 1, unitPrice: 1 }])}, ${sql().json({ email: 'twin@example.com' })},
        ${victim.key}, 'req_twin', now() + interval '1 second')`
    // One stored event applied twice.
    await sql()`insert into order_status_history (order_id, from_status, requested_status, to_status, outcome, webhook_event_id) values
      (${victim.id}, 'pending_payment', 'paid', 'paid', 'applied', 'whe_twice'), (${victim.id}, 'paid', 'paid', 'paid', 'ignored', 'whe_twice')`

    const found = await audit()
    expect(found.healthy).toBe(false)
    expect(found.suspects).toEqual({ businessDuplicates: [], frequentReplays: [] })
    planted = [
      { kind: 'side_effect', ids: { orderId: victim.id, effect: 'invoice' }, count: 2 },
      // Two emails, and no marker of an effect that sends one (the invoice's are not).
      { kind: 'email', ids: { orderId: victim.id, markers: 0 }, count: 2 },
      { kind: 'invoice', ids: { orderId: victim.id }, count: 2 },
      { kind: 'order_per_cart', ids: { tenantId, cartId: victim.cartId, orderIds: [victim.id, twin] }, count: 2 },
      { kind: 'order_per_key', ids: { tenantId, key: victim.key, orderIds: [victim.id, twin] }, count: 2 },
      { kind: 'webhook_event', ids: { webhookEventId: 'whe_twice' }, count: 2 },
    ]
    expect(found.exactlyOnceViolations).toEqual(planted)
  })

  it('reports refunds made twice: one key\'s two refunds, more held than the order\'s amount, a provider refund made twice or above the payment', async () => {
    const tenantId = stack.tenant.tenantId
    const refund = (orderId: string, fields: { amount: number, status: string, source?: string, key?: string }) => {
      const id = newId('re')
      return sql()`insert into refunds (id, order_id, tenant_id, amount, currency, status, source, idempotency_key, created_at)
        values (${id}, ${orderId}, ${tenantId}, ${fields.amount}, 'IDR', ${fields.status}, ${fields.source ?? 'api'}, ${fields.key ?? null}, now())`.then(() => id)
    }
    // One key's refund executed twice (small amounts: nothing over the order's).
    const twice = await order(validOrderBody({ customer: { email: `refund-twice-${randomUUID()}@example.com` } }))
    const refundKey = newIdempotencyKey()
    const first = await refund(twice.id, { amount: 1_000, status: 'succeeded', key: refundKey })
    const second = await refund(twice.id, { amount: 1_000, status: 'pending', key: refundKey })
    await sql()`update refunds set created_at = created_at + interval '1 second' where id = ${second}`
    // More held than the order's 150,000: a failed refund holds nothing, a pending one does.
    const over = await order(validOrderBody({ customer: { email: `refund-over-${randomUUID()}@example.com` } }))
    await refund(over.id, { amount: 100_000, status: 'succeeded', key: newIdempotencyKey() })
    await refund(over.id, { amount: 60_000, status: 'pending', key: newIdempotencyKey() })
    await refund(over.id, { amount: 150_000, status: 'failed', key: newIdempotencyKey() })
    // Within the amount once the failed one is set aside: not a violation.
    const freed = await order(validOrderBody({ customer: { email: `refund-freed-${randomUUID()}@example.com` } }))
    await refund(freed.id, { amount: 100_000, status: 'failed', key: newIdempotencyKey() })
    await refund(freed.id, { amount: 150_000, status: 'succeeded', key: newIdempotencyKey() })
    // At mockpay: one refund's key made twice, and a payment refunded above its amount (a keyed refund and the dashboard's).
    await sql()`alter table payment_intent_refunds drop constraint payment_intent_refunds_token_unique`
    const intent = async (orderId: string) => {
      const id = newId('pi')
      await sql()`insert into payment_intents (id, provider, idempotency_token, order_id, amount, currency, status) values (${id}, 'mockpay', ${`audit:${id}`}, ${orderId}, 150000, 'IDR', 'succeeded')`
      return id
    }
    const ledger = (intentId: string, amount: number, token: string | null) =>
      sql()`insert into payment_intent_refunds (id, intent_id, idempotency_token, amount) values (${newId('mre')}, ${intentId}, ${token}, ${amount})`
    const twiceAtProvider = await intent(twice.id)
    await ledger(twiceAtProvider, 1_000, `refund:${first}`)
    await ledger(twiceAtProvider, 1_000, `refund:${first}`)
    const overAtProvider = await intent(over.id)
    await ledger(overAtProvider, 100_000, `refund:${newId('re')}`)
    await ledger(overAtProvider, 60_000, null)
    // Dashboard refunds (no key) of one amount are two refunds, not one made twice.
    await ledger(await intent(freed.id), 1_000, null)
    await ledger(await intent(freed.id), 1_000, null)

    const found = await audit()
    expect(found.healthy).toBe(false)
    planted = [
      ...planted,
      { kind: 'refund_per_key', ids: { tenantId, key: refundKey, refundIds: [first, second] }, count: 2 },
      { kind: 'refunds_over_amount', ids: { orderId: over.id, amount: 150_000, refunded: 160_000 }, count: 2 },
      { kind: 'provider_refund_per_key', ids: { orderId: twice.id, intentId: twiceAtProvider, token: `refund:${first}` }, count: 2 },
      { kind: 'provider_refunds_over_amount', ids: { orderId: over.id, intentId: overAtProvider, amount: 150_000, refunded: 160_000 }, count: 2 },
    ]
    expect(found.exactlyOnceViolations).toEqual(planted)
  })

  it('reports the stock ledger broken: a reservation settled twice once its unique index is gone, counts moved without a ledger row', async () => {
    const tenantId = stack.tenant.tenantId
    const auth = { authorization: `Bearer ${stack.tenant.secretKey}` }
    for (const [sku, onHand] of [['AUDIT-TEE', 5], ['AUDIT-MUG', 3]] as const) {
      const set = await request(stack.app.url, `/api/inventory/${sku}`, { method: 'PUT', headers: auth, body: { onHand } })
      expect(set.status, set.text).toBe(200)
    }
    const tees = (quantity: number) => validOrderBody({ customer: { email: `stock-${randomUUID()}@example.com` }, amount: quantity * 75_000, items: [{ sku: 'AUDIT-TEE', quantity, unitPrice: 75_000 }] })
    const settledTwice = await order(tees(2))
    await order(tees(2))
    const canceled = await order(tees(1))
    const cancel = await request(stack.app.url, `/api/orders/${canceled.id}/cancel`, { method: 'POST', headers: { ...auth, 'idempotency-key': newIdempotencyKey() } })
    expect(cancel.status, cancel.text).toBe(200)
    // Reservations and a release through the API are the ledger at work: nothing new.
    expect((await audit()).exactlyOnceViolations).toEqual(planted)
    const [before] = await sql()<[{ onHand: number, reserved: number }]>`select on_hand::int as "onHand", reserved::int as reserved from stock where tenant_id = ${tenantId} and sku = 'AUDIT-TEE'`
    expect(before).toEqual({ onHand: 5, reserved: 4 })

    // One reservation both released and committed: the index that lets only the first in is gone. The
    // trigger still moves the counts (5 on hand, 4 reserved → 3 and 0), so they stay the ledger's sums.
    await sql()`drop index stock_movements_settled_once`
    await sql()`insert into stock_movements (tenant_id, sku, kind, source_type, source_id, order_id, quantity, on_hand_delta, reserved_delta, reason) values
      (${tenantId}, 'AUDIT-TEE', 'release', 'order', ${settledTwice.id}, ${settledTwice.id}, 2, 0, -2, 'canceled'),
      (${tenantId}, 'AUDIT-TEE', 'commit', 'order', ${settledTwice.id}, ${settledTwice.id}, 2, -2, -2, null)`
    // Seven units found and written straight into the count: no movement says where they came from.
    await sql()`update stock set on_hand = on_hand + 7 where tenant_id = ${tenantId} and sku = 'AUDIT-MUG'`

    const found = await audit()
    expect(found.healthy).toBe(false)
    expect(found.exactlyOnceViolations).toEqual([
      ...planted,
      { kind: 'stock_settled_twice', ids: { tenantId, orderId: settledTwice.id, sku: 'AUDIT-TEE', kinds: ['release', 'commit'] }, count: 2 },
      // Its one movement: the count set to 3.
      { kind: 'stock_off_ledger', ids: { tenantId, sku: 'AUDIT-MUG', onHand: 10, reserved: 0, ledgerOnHand: 3, ledgerReserved: 0 }, count: 1 },
    ])
  })

  it('is for operators only and validates its query', async () => {
    expectProblem(await request(stack.app.url, '/api/ops/audit/duplicates'), 'unauthorized')
    expectProblem(await request(stack.app.url, '/api/ops/audit/duplicates', { headers: { authorization: 'Bearer wrong' } }), 'unauthorized')
    for (const query of ['windowMinutes=0', 'windowMinutes=1441', 'windowMinutes=ten', 'replayThreshold=0', 'since=yesterday']) {
      const refused = await opsRequest(stack.app.url, `/api/ops/audit/duplicates?${query}`)
      expectProblem(refused, 'validation-failed')
      expect(refused.json.errors).toHaveLength(1)
    }
  })
})
