import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { stopAll, testSecrets } from '../support/app'
import { request } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { describeWithServices } from '../support/services'
import { deliver, midtransDelivery, webhookRowCounts } from '../support/webhooks'

// POST /api/webhooks/midtrans on a deployment that charges through another provider (mockpay here)
// although it holds a Midtrans server key: Midtrans signs only order_id, status_code and
// gross_amount, and only a Midtrans deployment's worker confirms a notification with the status API,
// so here the route does not exist — even a genuinely signed settlement is 404 and stores nothing.

describeWithServices('POST /api/webhooks/midtrans where another provider is configured', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    // The test environment sets MIDTRANS_SERVER_KEY; PAYMENT_PROVIDER stays mockpay.
    stack = await startOrdersStack('midtrans-webhook-route')
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  it('answers a signed settlement 404 not-found naming the endpoints served, stores nothing, and the order stays unpaid', async () => {
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const order = created.json
    const before = await webhookRowCounts(stack.sql)

    const delivery = midtransDelivery({ orderId: order.id, transactionId: randomUUID(), transactionStatus: 'settlement', grossAmount: `${order.amount}.00` }, { serverKey: testSecrets.midtransServerKey })
    const answer = await deliver(stack.app.url, delivery)

    expectProblem(answer, 'not-found')
    expect(answer.json.detail).toBe('No webhook provider "midtrans" here. Point the provider at one of /api/webhooks/standard, /api/webhooks/stripe or /api/webhooks/mockpay.')
    expect(await webhookRowCounts(stack.sql)).toEqual(before)
    const [stored] = await stack.sql<Array<{ status: string }>>`select status from orders where id = ${order.id}`
    expect(stored).toEqual({ status: 'pending_payment' })

    const ready = await opsRequest(stack.app.url, '/api/ready')
    expect(ready.json.webhooks).toEqual({ providers: ['standard', 'stripe', 'mockpay'] })
    // Another provider's route is still served (a signature check, not a 404).
    expectProblem(await request(stack.app.url, '/api/webhooks/stripe', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), 'webhook-signature-invalid')
  })
})
