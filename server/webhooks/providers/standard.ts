import { z } from 'zod'
import type { PaymentEvent, WebhookDelivery, WebhookProvider } from '../types'
import { checkTimestamp, explainIssues, hmacSha256, sameBytes } from './common'

/**
 * Standard Webhooks (standardwebhooks.com): `v1,<base64 HMAC-SHA256 of id.timestamp.body>` with the
 * base64 key after `whsec_`; several space-separated signatures during a key rotation. Entries of
 * other versions (`v1a,…`, asymmetric signatures, which we do not verify) are skipped.
 */

const secretBytes = (secret: string) => Buffer.from(secret.replace(/^whsec_/, ''), 'base64')

export function signStandardWebhook(secret: string, id: string, timestamp: number, body: Buffer | string): string {
  return `v1,${hmacSha256(secretBytes(secret), `${id}.${timestamp}.`, body).toString('base64')}`
}

/**
 * Svix signs the same scheme under svix-id, svix-timestamp and svix-signature; its own verifier takes
 * either name for each header. The webhook-* one wins when both come, as that is the one stored.
 */
const headerOf = (delivery: WebhookDelivery, name: 'id' | 'timestamp' | 'signature') =>
  delivery.header(`webhook-${name}`) ?? delivery.header(`svix-${name}`)

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
  signatureHeaders: ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'svix-id', 'svix-timestamp', 'svix-signature'],
  verify(delivery, secret) {
    const id = headerOf(delivery, 'id')
    const signatures = headerOf(delivery, 'signature')
    if (!id || !signatures) return { ok: false, reason: 'webhook-id or webhook-signature header missing', claimedEventId: id }
    const time = checkTimestamp(headerOf(delivery, 'timestamp'), delivery.nowSeconds)
    if (!time.ok) return { ok: false, reason: time.reason, claimedEventId: id }
    const expected = Buffer.from(signStandardWebhook(secret, id, time.seconds, delivery.body).slice(3), 'base64')
    const matches = signatures.split(' ').some((entry) => {
      const [version, signature] = entry.split(',', 2)
      return version === 'v1' && signature !== undefined && sameBytes(Buffer.from(signature, 'base64'), expected)
    })
    return matches ? { ok: true } : { ok: false, reason: 'no v1 signature matches', claimedEventId: id }
  },
  parse(json, delivery) {
    const parsed = StandardEvent.safeParse(json)
    if (!parsed.success) return { ok: false, reason: explainIssues(parsed.error) }
    const { type, data } = parsed.data
    // For payment.refunded, data.amount is the amount refunded.
    const event: PaymentEvent = { eventId: headerOf(delivery, 'id')!, type, orderId: data.orderId, paymentId: data.paymentId, amount: data.amount, currency: data.currency }
    return { ok: true, event }
  },
}
