import { checkTimestamp, hmacSha256, sameBytes, type Verification, type WebhookDelivery } from './signing'

/**
 * Standard Webhooks (standardwebhooks.com): `v1,<base64 HMAC-SHA256 of id.timestamp.body>` with the
 * base64 key after `whsec_`; several space-separated signatures during a key rotation. Entries of
 * other versions (`v1a,…`, asymmetric signatures, which are not verified here) are skipped.
 */

/** The headers a delivery is verified by, under both names (Svix sends `svix-*`). */
export const STANDARD_SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'svix-id', 'svix-timestamp', 'svix-signature'] as const

const secretBytes = (secret: string) => Buffer.from(secret.replace(/^whsec_/, ''), 'base64')

export function signStandardWebhook(secret: string, id: string, timestamp: number, body: Buffer | string): string {
  return `v1,${hmacSha256(secretBytes(secret), `${id}.${timestamp}.`, body).toString('base64')}`
}

/**
 * Svix signs the same scheme under svix-id, svix-timestamp and svix-signature; its own verifier takes
 * either name for each header. The webhook-* one wins when both come, as that is the one stored.
 */
export const standardWebhookHeader = (delivery: WebhookDelivery, name: 'id' | 'timestamp' | 'signature') =>
  delivery.header(`webhook-${name}`) ?? delivery.header(`svix-${name}`)

export function verifyStandardWebhook(delivery: WebhookDelivery, secret: string): Verification {
  const id = standardWebhookHeader(delivery, 'id')
  const signatures = standardWebhookHeader(delivery, 'signature')
  if (!id || !signatures) return { ok: false, reason: 'webhook-id or webhook-signature header missing', claimedEventId: id }
  const time = checkTimestamp(standardWebhookHeader(delivery, 'timestamp'), delivery.nowSeconds)
  if (!time.ok) return { ok: false, reason: time.reason, claimedEventId: id }
  const expected = Buffer.from(signStandardWebhook(secret, id, time.seconds, delivery.body).slice(3), 'base64')
  const matches = signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',', 2)
    return version === 'v1' && signature !== undefined && sameBytes(Buffer.from(signature, 'base64'), expected)
  })
  return matches ? { ok: true } : { ok: false, reason: 'no v1 signature matches', claimedEventId: id }
}
