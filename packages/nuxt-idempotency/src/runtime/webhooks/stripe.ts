import { checkTimestamp, hmacSha256, sameBytes, type Verification, type WebhookDelivery } from './signing'

/**
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">[,v1=…][,v0=…]`. Any v1 may
 * match (Stripe sends one per active secret while a secret rolls); v0 is a test scheme and never
 * counts. Unlike stripe-node, a timestamp too far in the future is refused too.
 */
export function verifyStripeSignature(delivery: WebhookDelivery, secret: string): Verification {
  const header = delivery.header('stripe-signature')
  if (!header) return { ok: false, reason: 'Stripe-Signature header missing' }
  const pairs = header.split(',').map(part => part.trim().split('=', 2) as [string, string | undefined])
  const timestamps = pairs.filter(([name]) => name === 't')
  if (timestamps.length !== 1) return { ok: false, reason: 'Stripe-Signature needs exactly one t=' }
  const time = checkTimestamp(timestamps[0]![1], delivery.nowSeconds)
  if (!time.ok) return time
  const expected = hmacSha256(secret, `${time.seconds}.`, delivery.body)
  const matches = pairs.some(([name, value]) => name === 'v1' && value !== undefined && /^[0-9a-f]{64}$/.test(value)
    && sameBytes(Buffer.from(value, 'hex'), expected))
  return matches ? { ok: true } : { ok: false, reason: 'no v1 signature matches' }
}
