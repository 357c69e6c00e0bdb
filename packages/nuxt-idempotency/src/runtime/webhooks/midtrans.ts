import { createHash } from 'node:crypto'
import { parseJsonBody, sameBytes, type Verification, type WebhookDelivery } from './signing'

/**
 * Midtrans HTTP notifications: the signature is in the body, `signature_key` =
 * SHA-512(order_id + status_code + gross_amount + server key), hex. Nothing else is signed, so
 * nothing else may decide anything on its own.
 */

export interface MidtransSignedFields {
  order_id: string
  status_code: string
  gross_amount: string
  signature_key: string
}

export function midtransSignature(serverKey: string, orderId: string, statusCode: string, grossAmount: string): string {
  return createHash('sha512').update(`${orderId}${statusCode}${grossAmount}${serverKey}`).digest('hex')
}

/** The signed fields of a notification body when each has its documented form. */
export function midtransSignedFields(json: unknown): MidtransSignedFields | undefined {
  const body = json as Partial<Record<keyof MidtransSignedFields, unknown>> | null
  if (typeof body !== 'object' || body === null) return undefined
  const { order_id, status_code, gross_amount, signature_key } = body
  if (typeof order_id !== 'string' || order_id.length < 1 || order_id.length > 64) return undefined
  if (typeof status_code !== 'string' || !/^\d{3}$/.test(status_code)) return undefined
  if (typeof gross_amount !== 'string' || !/^\d{1,15}(\.\d{1,2})?$/.test(gross_amount)) return undefined
  if (typeof signature_key !== 'string' || !/^[0-9a-fA-F]{128}$/.test(signature_key)) return undefined
  return { order_id, status_code, gross_amount, signature_key }
}

export function verifyMidtransSignature(delivery: WebhookDelivery, serverKey: string): Verification {
  const signed = midtransSignedFields(parseJsonBody(delivery.body))
  if (!signed) return { ok: false, reason: 'body lacks order_id, status_code, gross_amount or signature_key' }
  const expected = Buffer.from(midtransSignature(serverKey, signed.order_id, signed.status_code, signed.gross_amount), 'hex')
  return sameBytes(Buffer.from(signed.signature_key, 'hex'), expected) ? { ok: true } : { ok: false, reason: 'signature_key does not match' }
}

/**
 * Every transaction_status Midtrans documents (docs.midtrans.com, "Transaction Status"; "HTTP(S)
 * Notification / Webhooks", Status Definition).
 */
const MIDTRANS_STATUSES = new Set([
  'pending', 'authorize', 'capture', 'settlement', 'deny', 'cancel', 'expire', 'failure',
  'refund', 'partial_refund', 'chargeback', 'partial_chargeback',
])
/** The statuses whose notifications carry `refund_amount`, what is refunded so far (a settled payment's later states). */
const REFUND_STATUSES = new Set(['refund', 'partial_refund'])
const WHOLE_AMOUNT = /^\d{1,15}(\.0{1,2})?$/

/** What tells one Midtrans notification from another. */
export interface MidtransNotificationIdentity {
  order_id: string
  status_code: string
  gross_amount: string
  transaction_status: string
  /** Whole units refunded so far, on a refund or partial_refund notification that says it (`refund_amount`). */
  refunded?: number
}

/**
 * The identity of a notification: its signed triple, its transaction_status and, for refund and
 * partial_refund, its `refund_amount`. Midtrans sends one notification per change, and each refund
 * of an order raises its refund_amount, so successive partial refunds (which share the triple and
 * the status) are told apart, while a redelivery of one notification has the same identity.
 *
 * Only the triple is signed. Anyone holding one genuine notification of an order can relabel the
 * rest, so what the identity may vary with is bounded: a documented status (12), and a refund_amount
 * in whole units no more than gross_amount. That is at most a few ids per order and amount, and
 * none of them is worth anything alone: a refund-type status says nothing Midtrans' status API does
 * not confirm (Midtrans signs a refund and a settlement alike, status_code 200), and a receiver
 * must ask that API before it acts ("HTTP(S) Notification", Verify Using GET Status API Call).
 */
export function midtransNotificationIdentity(json: unknown): { ok: true, identity: MidtransNotificationIdentity } | { ok: false, reason: string } {
  const signed = midtransSignedFields(json)
  if (!signed) return { ok: false, reason: 'body lacks order_id, status_code, gross_amount or signature_key' }
  const { transaction_status: status, refund_amount: refundAmount } = json as { transaction_status?: unknown, refund_amount?: unknown }
  if (typeof status !== 'string' || !MIDTRANS_STATUSES.has(status)) {
    return { ok: false, reason: `transaction_status ${JSON.stringify(status)} is not a status Midtrans documents` }
  }
  const identity: MidtransNotificationIdentity = { order_id: signed.order_id, status_code: signed.status_code, gross_amount: signed.gross_amount, transaction_status: status }
  if (!REFUND_STATUSES.has(status) || refundAmount === undefined) return { ok: true, identity }
  if (typeof refundAmount !== 'string' || !WHOLE_AMOUNT.test(refundAmount) || Number(refundAmount) > Number(signed.gross_amount)) {
    return { ok: false, reason: `refund_amount ${JSON.stringify(refundAmount)} is not a whole amount of at most gross_amount ${signed.gross_amount}` }
  }
  return { ok: true, identity: { ...identity, refunded: Number(refundAmount) } }
}

/** `order_id:status_code:gross_amount:transaction_status`, and `:refunded` when the identity has it. */
export function midtransNotificationId(identity: MidtransNotificationIdentity): string {
  const { order_id, status_code, gross_amount, transaction_status, refunded } = identity
  return [order_id, status_code, gross_amount, transaction_status, ...(refunded === undefined ? [] : [refunded])].join(':')
}
