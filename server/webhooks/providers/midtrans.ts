import { midtransNotificationId, midtransNotificationIdentity, verifyMidtransSignature } from 'nuxt-idempotency/core'
import { z } from 'zod'
import type { PaymentEventType } from '../../payments/types'
import type { PaymentEvent, WebhookProvider } from '../types'
import { explainIssues } from './common'

/**
 * Midtrans HTTP notifications: the signature is in the body, `signature_key` =
 * SHA-512(order_id + status_code + gross_amount + server key), hex. Nothing else is signed:
 * transaction_status, fraud_status, transaction_id and currency can be rewritten by anyone who holds
 * one genuine notification, so none of them may decide a payment state on its own.
 *
 * - transaction_status is believed only together with the status_code it is documented with (below);
 *   any other pairing is refused. Within one status_code every status asks for the same state or
 *   for none, so relabelling a signed notification cannot move an order.
 * - The dedupe key is the signed triple plus that bound status and, for refund and partial_refund,
 *   the refund_amount so far (a whole amount no more than gross_amount): every refund of an order
 *   raises it, so each dashboard refund's notification is an event of its own, where the triple and
 *   status alone would deduplicate the second partial refund away. Varying it mints at most one id
 *   per rupiah of the order, and none of them can move an order: a refund-type status is
 *   informational, and webhook.apply applies what Midtrans' status API says, with its own total.
 * - Midtrans charges in IDR: the body's currency is not trusted, only checked.
 * - There is no timestamp; replays are harmless because state only moves up.
 */

const Signed = z.object({
  order_id: z.string().min(1).max(64),
  status_code: z.string().regex(/^\d{3}$/),
  gross_amount: z.string().regex(/^\d{1,15}(\.\d{1,2})?$/),
  signature_key: z.string().regex(/^[0-9a-fA-F]{128}$/),
})

export const Notification = Signed.extend({
  transaction_id: z.string().regex(/^[\w-]{1,64}$/),
  transaction_status: z.string().regex(/^[a-z_]{1,32}$/),
  fraud_status: z.string().regex(/^[a-z_]{1,32}$/).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).optional(),
})

const MIDTRANS_CURRENCY = 'IDR'

interface Reading {
  statusCode: '200' | '201' | '202'
  /** Only capture depends on the fraud review; elsewhere fraud_status changes nothing. */
  fraudStatus?: 'accept' | 'challenge'
  type: PaymentEventType
}

/**
 * The status_code each transaction_status comes with, from Midtrans' "Status Codes" reference and
 * its HTTP notification samples (docs.midtrans.com):
 * - 200 success: settlement; capture with fraud_status accept; authorize (card pre-authorisation);
 *   cancel of a card payment; and a settled payment's later states refund, partial_refund,
 *   chargeback, partial_chargeback.
 * - 201 pending: pending; capture with fraud_status challenge (awaiting the merchant's review).
 * - 202 denied: deny, cancel, expire. The docs give failure no code; it is read under 202, where
 *   every status asks for payment_failed, so the label cannot matter.
 * Under 200 a refund and a settlement share one signature, so refund-type statuses (and authorize,
 * and a 200 cancel) are informational: confirming them with Midtrans' status API is the payment
 * adapter's job, not a notification's.
 * A chargeback or partial_chargeback stays informational even when the API confirms it: Midtrans
 * documents it for card payments only (which this checkout does not take through Midtrans), and
 * the money goes back through the card issuer, not as a refund of the shop's, so no refund is
 * recorded and no notice sent; the event, the API's word and the history row (informational) keep
 * it visible to an operator.
 */
const readings = new Map<string, Reading[]>([
  ['settlement', [{ statusCode: '200', type: 'payment.succeeded' }]],
  ['capture', [{ statusCode: '200', fraudStatus: 'accept', type: 'payment.succeeded' }, { statusCode: '201', fraudStatus: 'challenge', type: 'payment.updated' }]],
  ['authorize', [{ statusCode: '200', type: 'payment.updated' }]],
  ['refund', [{ statusCode: '200', type: 'payment.updated' }]],
  ['partial_refund', [{ statusCode: '200', type: 'payment.updated' }]],
  ['chargeback', [{ statusCode: '200', type: 'payment.updated' }]],
  ['partial_chargeback', [{ statusCode: '200', type: 'payment.updated' }]],
  ['pending', [{ statusCode: '201', type: 'payment.updated' }]],
  ['cancel', [{ statusCode: '200', type: 'payment.updated' }, { statusCode: '202', type: 'payment.failed' }]],
  ['deny', [{ statusCode: '202', type: 'payment.failed' }]],
  ['expire', [{ statusCode: '202', type: 'payment.failed' }]],
  ['failure', [{ statusCode: '202', type: 'payment.failed' }]],
])

type Reads = { ok: true, type: PaymentEventType } | { ok: false, reason: string }

function read(status: string, statusCode: string, fraudStatus: string | undefined): Reads {
  const documented = readings.get(status)
  if (!documented) return { ok: false, reason: `transaction_status "${status}" is not a Midtrans status this integration knows` }
  const reading = documented.find(r => r.statusCode === statusCode && (r.fraudStatus === undefined || r.fraudStatus === fraudStatus))
  if (reading) return { ok: true, type: reading.type }
  const byFraud = documented.some(r => r.fraudStatus)
  const what = !byFraud ? `transaction_status "${status}"` : fraudStatus ? `transaction_status "${status}" with fraud_status "${fraudStatus}"` : `transaction_status "${status}" without fraud_status`
  const needs = documented.map(r => r.fraudStatus ? `${r.statusCode} with fraud_status ${r.fraudStatus}` : r.statusCode).join(' or ')
  return { ok: false, reason: `${what} does not go with status_code "${statusCode}" (${status} needs ${needs})` }
}

export const midtransProvider: WebhookProvider = {
  name: 'midtrans',
  signatureHeaders: [],
  verify: verifyMidtransSignature,
  parse(json) {
    const parsed = Notification.safeParse(json)
    if (!parsed.success) return { ok: false, reason: explainIssues(parsed.error) }
    const n = parsed.data
    const reads = read(n.transaction_status, n.status_code, n.fraud_status)
    if (!reads.ok) return reads
    if (n.currency !== undefined && n.currency !== MIDTRANS_CURRENCY) {
      return { ok: false, reason: `currency "${n.currency}": Midtrans charges in ${MIDTRANS_CURRENCY}, and currency is not covered by signature_key` }
    }
    const identity = midtransNotificationIdentity(json)
    if (!identity.ok) return identity
    const eventId = midtransNotificationId(identity.identity)
    // No paymentId: transaction_id is unsigned, and as part of the stored event it would decide the
    // idempotency fingerprint, so a rewritten one (or a second attempt under a reused order_id) would
    // be answered 422 instead of replayed. It stays readable in the stored raw body.
    // Midtrans amounts are in the currency's major unit; IDR has no minor unit, so they coincide.
    const event: PaymentEvent = { eventId, type: reads.type, orderId: n.order_id, amount: Math.round(Number(n.gross_amount)), currency: MIDTRANS_CURRENCY }
    return { ok: true, event }
  },
}
