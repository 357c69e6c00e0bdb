import { z } from 'zod'

/**
 * What each provider posts, as its parser in server/webhooks/providers/ reads it (those schemas are
 * private to their modules). Fields a parser ignores are allowed. tests/unit/openapi.test.ts checks
 * that every example below is accepted by the provider's own parser.
 */

export const StandardWebhookEvent = z.object({
  type: z.enum(['payment.succeeded', 'payment.failed', 'payment.refunded']).meta({ description: 'payment.refunded: `data.amount` is the total refunded so far for the payment.' }),
  timestamp: z.iso.datetime({ offset: true }),
  data: z.object({
    orderId: z.string().min(1).max(64),
    paymentId: z.string().min(1).max(128),
    amount: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).meta({ description: 'In the currency\'s whole units as this app counts them (rupiah for IDR).' }),
    currency: z.string().regex(/^[A-Z]{3}$/),
  }),
}).meta({
  id: 'StandardWebhookEvent',
  description: 'A Standard Webhooks event (what mockpay sends). The event id is the `webhook-id` header, not a field.',
  example: { type: 'payment.succeeded', timestamp: '2026-12-01T09:14:03Z', data: { orderId: 'ord_8cf2b5a4d0e1', paymentId: 'pi_3b9f0e1c2d4a', amount: 150000, currency: 'IDR' } },
})

const stripeMetadataValue = z.string().min(1).max(64)
export const StripeWebhookEvent = z.object({
  id: z.string().regex(/^[\x21-\x7E]{1,255}$/).meta({ description: 'The event id: the dedupe key.' }),
  type: z.string().meta({ description: 'Understood: payment_intent.succeeded, payment_intent.payment_failed, charge.refunded, refund.created, refund.updated, refund.failed; any other type is 400 `payload-invalid`.' }),
  data: z.object({
    object: z.object({
      id: z.string().min(1).max(255),
      object: z.string().optional(),
      amount: z.number().int().nonnegative().optional(),
      amount_received: z.number().int().nonnegative().optional(),
      amount_refunded: z.number().int().nonnegative().optional().meta({ description: 'charge.refunded: the total refunded so far.' }),
      currency: z.string().regex(/^[a-zA-Z]{3}$/).optional(),
      payment_intent: z.string().max(255).nullish(),
      charge: z.string().max(255).nullish(),
      status: z.string().nullish(),
      metadata: z.object({
        order_id: stripeMetadataValue.optional(),
        orderId: stripeMetadataValue.optional(),
        refund_id: stripeMetadataValue.optional().meta({ description: 'This app\'s refund id on refunds it asked for.' }),
      }).optional().meta({ description: 'The order: `order_id` (what this app\'s PaymentIntents and refunds carry) or `orderId`. A refund made in Stripe\'s dashboard has neither: its order is found by `payment_intent`.' }),
    }),
  }),
}).meta({
  id: 'StripeWebhookEvent',
  description: 'A Stripe event (`Stripe-Signature`: `t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`, any v1 may match).',
  example: { id: 'evt_1QabcXYZ', type: 'payment_intent.succeeded', data: { object: { id: 'pi_3QabcXYZ', object: 'payment_intent', amount: 15000000, amount_received: 15000000, currency: 'idr', metadata: { order_id: 'ord_8cf2b5a4d0e1' } } } },
})

export const MidtransNotification = z.object({
  order_id: z.string().min(1).max(64),
  status_code: z.string().regex(/^\d{3}$/),
  gross_amount: z.string().regex(/^\d{1,15}(\.\d{1,2})?$/),
  signature_key: z.string().regex(/^[0-9a-fA-F]{128}$/).meta({ description: 'Hex SHA-512 of order_id + status_code + gross_amount + the server key: the signature.' }),
  transaction_id: z.string().regex(/^[\w-]{1,64}$/),
  transaction_status: z.string().regex(/^[a-z_]{1,32}$/).meta({ description: 'Believed only with the status_code Midtrans documents it with: 200 settlement, capture (fraud_status accept), authorize, cancel, refund, partial_refund, chargeback, partial_chargeback; 201 pending, capture (challenge); 202 deny, cancel, expire, failure.' }),
  fraud_status: z.string().regex(/^[a-z_]{1,32}$/).optional(),
  currency: z.string().regex(/^[A-Z]{3}$/).optional().meta({ description: 'IDR, when sent.' }),
}).meta({
  id: 'MidtransNotification',
  description: 'A Midtrans HTTP notification: the signature is `signature_key` in the body.',
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
