import { signStandardWebhook } from 'nuxt-idempotency/core'
import { RetryableJobError } from '../../jobs/errors'
import { defineJobKind } from '../../jobs/kind'
import { mockpayDeliverJob } from './job-types'

const DELIVERY_TIMEOUT_MS = 10_000

/**
 * One delivery of a mockpay event, as a provider sends it: the same body and webhook-id every time,
 * a fresh timestamp and signature per attempt, and anything but a 2xx retried with backoff.
 */
export function mockpayDeliver(target: { url: string, secret: string }) {
  return defineJobKind({
    ...mockpayDeliverJob,
    async run({ signal, complete }, delivery) {
      const body = JSON.stringify({
        type: delivery.type,
        timestamp: delivery.timestamp,
        data: { orderId: delivery.orderId, paymentId: delivery.paymentId, amount: delivery.amount, currency: delivery.currency },
      })
      const timestamp = Math.floor(Date.now() / 1000)
      const response = await fetch(target.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': delivery.webhookId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signStandardWebhook(target.secret, delivery.webhookId, timestamp, body),
        },
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(DELIVERY_TIMEOUT_MS)]),
      })
      await response.arrayBuffer()
      if (!response.ok) throw new RetryableJobError(`webhook endpoint answered ${response.status}`)
      await complete()
    },
  })
}
