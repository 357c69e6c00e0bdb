import { createHash } from 'node:crypto'
import { z } from 'zod'
import type { PaymentEvent, PaymentEventType, WebhookProvider } from '../types'
import { explainIssues, sameBytes } from './common'

/**
 * Midtrans HTTP notifications: the signature is in the body, `signature_key` =
 * SHA-512(order_id + status_code + gross_amount + server key), hex. There is no event id and no
 * timestamp: the dedupe key is the transaction id with its status (and fraud status, which moves a
 * `capture` from review to accepted), and replays are harmless because state only moves up.
 */

const Signed = z.object({
  order_id: z.string().min(1).max(64),
  status_code: z.string().regex(/^\d{3}$/),
  gross_amount: z.string().regex(/^\d{1,15}(\.\d{1,2})?$/),
  signature_key: z.string().regex(/^[0-9a-fA-F]{128}$/),
})

const Notification = Signed.extend({
  transaction_id: z.string().regex(/^[\w-]{1,64}$/),
  transaction_status: z.string().regex(/^[a-z_]{1,32}$/),
  fraud_status: z.string().regex(/^[a-z_]{1,32}$/).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).default('IDR'),
})

function typeOf(status: string, fraudStatus: string | undefined): PaymentEventType | undefined {
  switch (status) {
    case 'capture': return fraudStatus === 'challenge' ? 'payment.updated' : 'payment.succeeded'
    case 'settlement': return 'payment.succeeded'
    case 'deny': case 'cancel': case 'expire': case 'failure': return 'payment.failed'
    case 'refund': case 'chargeback': return 'payment.refunded'
    // Nothing to move yet (awaiting payment, a partial refund); recorded in the order's history.
    case 'pending': case 'authorize': case 'partial_refund': case 'partial_chargeback': return 'payment.updated'
    default: return undefined
  }
}

const parseJson = (body: Buffer): unknown => {
  try {
    return JSON.parse(body.toString('utf8'))
  }
  catch {
    return undefined
  }
}

export function midtransSignature(serverKey: string, orderId: string, statusCode: string, grossAmount: string): string {
  return createHash('sha512').update(`${orderId}${statusCode}${grossAmount}${serverKey}`).digest('hex')
}

export const midtransProvider: WebhookProvider = {
  name: 'midtrans',
  signatureHeaders: [],
  verify(delivery, serverKey) {
    const signed = Signed.safeParse(parseJson(delivery.body))
    if (!signed.success) return { ok: false, reason: 'body lacks order_id, status_code, gross_amount or signature_key' }
    const { order_id, status_code, gross_amount, signature_key } = signed.data
    const expected = Buffer.from(midtransSignature(serverKey, order_id, status_code, gross_amount), 'hex')
    return sameBytes(Buffer.from(signature_key, 'hex'), expected) ? { ok: true } : { ok: false, reason: 'signature_key does not match' }
  },
  parse(json) {
    const parsed = Notification.safeParse(json)
    if (!parsed.success) return { ok: false, reason: explainIssues(parsed.error) }
    const n = parsed.data
    const type = typeOf(n.transaction_status, n.fraud_status)
    if (!type) return { ok: false, reason: `transaction_status "${n.transaction_status}" is not a Midtrans status this integration knows` }
    const eventId = [n.transaction_id, n.transaction_status, n.fraud_status].filter(Boolean).join(':')
    // Midtrans amounts are in the currency's major unit; IDR has no minor unit, so they coincide.
    const event: PaymentEvent = { eventId, type, orderId: n.order_id, paymentId: n.transaction_id, amount: Math.round(Number(n.gross_amount)), currency: n.currency }
    return { ok: true, event }
  },
}
