import { z } from 'zod'
import { STANDARD_SIGNATURE_HEADERS, standardWebhookHeader, verifyStandardWebhook } from 'nuxt-idempotency/core'
import type { PaymentEvent, WebhookProvider } from '../types'
import { explainIssues } from './common'

/**
 * Standard Webhooks (standardwebhooks.com), and Svix under its `svix-*` header names: verified by
 * the idempotency module; the body read here as a payment event.
 */

export const StandardEvent = z.object({
  type: z.enum(['payment.succeeded', 'payment.failed', 'payment.refunded']),
  timestamp: z.iso.datetime({ offset: true }),
  data: z.object({
    orderId: z.string().min(1).max(64),
    paymentId: z.string().min(1).max(128),
    amount: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    currency: z.string().regex(/^[A-Z]{3}$/),
  }),
})

export const standardProvider: WebhookProvider = {
  name: 'standard',
  signatureHeaders: STANDARD_SIGNATURE_HEADERS,
  verify: verifyStandardWebhook,
  parse(json, delivery) {
    const parsed = StandardEvent.safeParse(json)
    if (!parsed.success) return { ok: false, reason: explainIssues(parsed.error) }
    const { type, data } = parsed.data
    // For payment.refunded, data.amount is the amount refunded.
    const event: PaymentEvent = { eventId: standardWebhookHeader(delivery, 'id')!, type, orderId: data.orderId, paymentId: data.paymentId, amount: data.amount, currency: data.currency }
    return { ok: true, event }
  },
}
