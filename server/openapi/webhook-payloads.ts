import { z } from 'zod'

/**
 * What each provider posts, as its parser in server/webhooks/providers/ reads it. Those schemas are
 * private to their modules: each declaration below is the provider's own, verbatim
 * (`webhookPayloadSources` names where it lives, and tests/unit/openapi.test.ts fails when the two
 * differ); fields a parser ignores are allowed. The same test has each provider's parser accept the
 * example documented here.
 */

const StandardEvent = z.object({
  type: z.enum(['payment.succeeded', 'payment.failed', 'payment.refunded']),
  timestamp: z.iso.datetime({ offset: true }),
  data: z.object({
    orderId: z.string().min(1).max(64),
    paymentId: z.string().min(1).max(128),
    amount: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    currency: z.string().regex(/^[A-Z]{3}$/),
  }),
})

const metadataValue = z.string().min(1).max(64)
const currencyCode = z.string().regex(/^[a-zA-Z]{3}$/)

const StripeEvent = z.object({
  id: z.string().regex(/^[\x21-\x7E]{1,255}$/),
  type: z.string(),
  data: z.object({
    object: z.object({
      id: z.string().min(1).max(255),
      object: z.string().optional(),
      amount: z.number().int().nonnegative().optional(),
      amount_received: z.number().int().nonnegative().optional(),
      amount_refunded: z.number().int().nonnegative().optional(),
      currency: currencyCode.optional(),
      payment_intent: z.string().max(255).nullish(),
      charge: z.string().max(255).nullish(),
      status: z.string().nullish(),
      // This app's PaymentIntents and refunds carry order_id (server/payments/stripe.ts); SPEC §5
      // also documents orderId, for events made elsewhere. order_id wins when both are there.
      // A refund made in Stripe's dashboard has none: its order is found by its payment_intent.
      metadata: z.object({ order_id: metadataValue.optional(), orderId: metadataValue.optional(), refund_id: metadataValue.optional() }).optional(),
    }).refine(object => object.metadata?.order_id !== undefined || object.metadata?.orderId !== undefined || (object.object === 'refund' && !!object.payment_intent),
      { message: 'needs order_id (or orderId), the order the object belongs to', path: ['metadata'] }),
  }),
})

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
  currency: z.string().regex(/^[A-Z]{3}$/).optional(),
})

/** Where each declaration above is the provider's own. */
export const webhookPayloadSources: Record<string, string[]> = {
  'server/webhooks/providers/standard.ts': ['StandardEvent'],
  'server/webhooks/providers/stripe.ts': ['metadataValue', 'currencyCode', 'StripeEvent'],
  'server/webhooks/providers/midtrans.ts': ['Signed', 'Notification'],
}

export const StandardWebhookEvent = StandardEvent.meta({
  id: 'StandardWebhookEvent',
  description: 'A Standard Webhooks event (what mockpay sends); the event id is the `webhook-id` header, not a field. `data.amount` is in the currency\'s units as this app counts them (rupiah for IDR); for `payment.refunded` it is the total refunded so far for the payment.',
  example: { type: 'payment.succeeded', timestamp: '2026-12-01T09:14:03Z', data: { orderId: 'ord_8cf2b5a4d0e1', paymentId: 'pi_3b9f0e1c2d4a', amount: 150000, currency: 'IDR' } },
})

export const StripeWebhookEvent = StripeEvent.meta({
  id: 'StripeWebhookEvent',
  description: 'A Stripe event; `id` is the dedupe key. Understood types: payment_intent.succeeded, payment_intent.payment_failed, charge.refunded (`amount_refunded`: the total refunded so far), refund.created, refund.updated, refund.failed; any other is 400 `payload-invalid`. '
    + 'The order is `data.object.metadata.order_id` (what this app\'s PaymentIntents and refunds carry) or `orderId`; a refund made in Stripe\'s dashboard has neither, and its order is found by `payment_intent`.',
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
