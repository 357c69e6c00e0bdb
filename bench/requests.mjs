// What the bench sends: order bodies, signed Standard Webhooks deliveries, and each scenario's
// stream of requests (new keys, or one key replayed).
import { createHmac, randomUUID } from 'node:crypto'
import { confirmRequest } from './payer.mjs'

export const webhookSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
export const mockpaySecret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`

export const orderBody = cartId => JSON.stringify({
  cartId, currency: 'IDR', amount: 150000, paymentMethod: 'bank_transfer',
  items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 75000 }], customer: { email: 'bench@example.com' },
})

/** The SKUs of the tracked-stock workload: the bench sets a count for each before it runs (bench/run.mjs). */
export const trackedSkus = ['BENCH-A', 'BENCH-B', 'BENCH-C']

/** An order of three tracked SKUs: it reserves each in the order's own statement (docs/inventory.md#reservations). */
const trackedOrderBody = cartId => JSON.stringify({
  cartId, currency: 'IDR', amount: 150000, paymentMethod: 'bank_transfer',
  items: trackedSkus.map((sku, i) => ({ sku, quantity: 1, unitPrice: [50000, 60000, 40000][i] })), customer: { email: 'bench@example.com' },
})

export const orderHeaders = (secretKey, key) => ({ 'content-type': 'application/json', 'authorization': `Bearer ${secretKey}`, 'idempotency-key': key })

/** A signed Standard Webhooks delivery, as a provider sends it (fresh timestamp per attempt). */
const eventBody = webhookId => JSON.stringify({ type: 'payment.succeeded', timestamp: new Date().toISOString(), data: { orderId: `ord_${webhookId}`, paymentId: `pi_${webhookId}`, amount: 150000, currency: 'IDR' } })

function signedWebhook(webhookId, body = eventBody(webhookId)) {
  const timestamp = Math.floor(Date.now() / 1000)
  const signature = createHmac('sha256', Buffer.from(webhookSecret.slice(6), 'base64')).update(`${webhookId}.${timestamp}.${body}`).digest('base64')
  return { headers: { 'content-type': 'application/json', 'webhook-id': webhookId, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` }, body }
}

/**
 * What each request of a workload sends: new key or the same key, order (`trackedOrder`: of three
 * tracked SKUs) or webhook (or an unknown route, or `GET /api/health`). `replay` says
 * that the first request must be sent (and stored) before the run replays it. `paid`: new orders,
 * and in between the confirmations that pay them, as `payer` hands their intents out (bench/payer.mjs).
 */
export function workload(kind, mode, secretKey, payer) {
  const replay = mode === 'replay'
  // A liveness probe: no body, no credentials, no work behind the answer.
  if (kind === 'liveness') return { path: '/api/health', method: 'GET', replay: false, next: () => ({}) }
  // A client calling an endpoint that does not exist: every answer is a 404 problem.
  if (kind === 'unknownRoute') return { path: '/api/orders/ord_bench/capture', replay: false, next: () => ({ headers: { 'content-type': 'application/json' }, body: '{}' }) }
  if (kind === 'webhook') {
    // A redelivery keeps its body (and so its fingerprint); only the signature's timestamp moves.
    const redelivered = `msg_bench_${randomUUID()}`
    const body = eventBody(redelivered)
    return { path: '/api/webhooks/standard', replay, next: () => (replay ? signedWebhook(redelivered, body) : signedWebhook(`msg_${randomUUID()}`)) }
  }
  const replayKey = `bench-replay-${randomUUID()}`
  const body = kind === 'trackedOrder' ? trackedOrderBody : orderBody
  return {
    path: '/api/orders',
    replay,
    next: () => {
      const intentId = payer?.take()
      if (intentId) return confirmRequest(intentId)
      const key = replay ? replayKey : randomUUID()
      return { headers: orderHeaders(secretKey, key), body: body(key) }
    },
  }
}
