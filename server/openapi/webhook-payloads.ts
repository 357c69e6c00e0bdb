import { Notification } from '../webhooks/providers/midtrans'
import { StandardEvent } from '../webhooks/providers/standard'
import { StripeEvent } from '../webhooks/providers/stripe'

/**
 * What each provider posts: the very schema its parser in server/webhooks/providers/ reads it with
 * (fields a parser ignores are allowed), with the document's description and example.
 * tests/unit/openapi.test.ts has each provider's parser accept the example documented here.
 */

export const StandardWebhookEvent = StandardEvent.meta({
  id: 'StandardWebhookEvent',
  description: 'A Standard Webhooks event (what mockpay sends); the event id is the `webhook-id` header, not a field. `data.amount` is in the currency\'s units as this app counts them (rupiah for IDR); for `payment.refunded` it is the total refunded so far for the payment.',
  example: { type: 'payment.succeeded', timestamp: '2026-12-01T09:14:03Z', data: { orderId: 'ord_8cf2b5a4d0e1', paymentId: 'pi_3b9f0e1c2d4a', amount: 150000, currency: 'IDR' } },
})

export const StripeWebhookEvent = StripeEvent.meta({
  id: 'StripeWebhookEvent',
  description: 'A Stripe event; `id` is the dedupe key. Understood types: payment_intent.succeeded, payment_intent.payment_failed, charge.refunded (`amount_refunded`: the total refunded so far), refund.created, refund.updated, refund.failed, charge.refund.updated; any other is 400 `payload-invalid`. '
    + 'The order is `data.object.metadata.order_id` (what this app\'s PaymentIntents and refunds carry) or `orderId`; a refund made in Stripe\'s dashboard, or a charge without its intent\'s metadata, has neither, and its order is found by `payment_intent`.',
  example: { id: 'evt_1QabcXYZ', type: 'payment_intent.succeeded', data: { object: { id: 'pi_3QabcXYZ', object: 'payment_intent', amount: 15000000, amount_received: 15000000, currency: 'idr', metadata: { order_id: 'ord_8cf2b5a4d0e1' } } } },
})

export const MidtransNotification = Notification.meta({
  id: 'MidtransNotification',
  description: 'A Midtrans HTTP notification. The signature is `signature_key`: hex SHA-512 of order_id + status_code + gross_amount + the server key. '
    + '`transaction_status` is believed only with the status_code Midtrans documents it with: 200 settlement, capture (fraud_status accept), authorize, cancel, refund, partial_refund, chargeback, partial_chargeback; 201 pending, capture (challenge); 202 deny, cancel, expire, failure. `currency`, when sent, is IDR.',
  example: {
    order_id: 'ord_8cf2b5a4d0e1',
    status_code: '200',
    gross_amount: '150000.00',
    signature_key: 'f'.repeat(128),
    transaction_id: '9aed5972-5b6a-401e-894b-a32c91ed1a3a',
    transaction_status: 'settlement',
    fraud_status: 'accept',
    currency: 'IDR',
  },
})
