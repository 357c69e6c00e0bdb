import { verifyStripeSignature } from 'nuxt-idempotency/core'
import { z } from 'zod'
import type { RefundStatus } from '../../../shared/statuses'
import type { PaymentEventType } from '../../payments/types'
import type { PaymentEvent, WebhookProvider } from '../types'
import { fromStripeAmount } from '../../payments/currencies'
import { explainIssues } from './common'

/** Stripe: `Stripe-Signature` verified by the idempotency module; the event read here as a payment event. */

// A Map, not an object literal: a type such as "toString" must not find Object.prototype's member.
const typeOf = new Map<string, PaymentEventType>([
  ['payment_intent.succeeded', 'payment.succeeded'],
  ['payment_intent.payment_failed', 'payment.failed'],
  ['charge.refunded', 'payment.refunded'],
  // A Refund object: one refund, each time it is created or changes state (charge.refund.updated:
  // the older name Stripe still sends for a refund's update).
  ['refund.created', 'refund.updated'],
  ['refund.updated', 'refund.updated'],
  ['refund.failed', 'refund.updated'],
  ['charge.refund.updated', 'refund.updated'],
])

/**
 * A Refund's states (stripe-node's Refund.status) as this app's: requires_action waits on the
 * customer, so it is still pending; a canceled refund (one awaiting action, called off) gave nothing back.
 */
const refundStatusOf = {
  pending: 'pending',
  requires_action: 'pending',
  succeeded: 'succeeded',
  failed: 'failed',
  canceled: 'failed',
} as const satisfies Record<string, RefundStatus>

const metadataValue = z.string().min(1).max(64)
const currencyCode = z.string().regex(/^[a-zA-Z]{3}$/)

export const StripeEvent = z.object({
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
      // This app's PaymentIntents and refunds carry order_id (server/payments/stripe.ts); docs/webhooks.md
      // also takes orderId, for events made elsewhere. order_id wins when both are
      // there. A refund made in Stripe's dashboard has none, nor has a charge whose metadata was not
      // copied from its intent: the order of a refund or charge is found by its payment_intent.
      metadata: z.object({ order_id: metadataValue.optional(), orderId: metadataValue.optional(), refund_id: metadataValue.optional() }).optional(),
      // A charge's newest refunds, when the API version still embeds them (charge.refunded);
      // has_more: some are not listed (https://docs.stripe.com/api/pagination).
      refunds: z.object({
        data: z.array(z.object({
          id: z.string().min(1).max(255).optional(),
          amount: z.number().int().nonnegative(),
          status: z.string().nullish(),
          metadata: z.object({ refund_id: metadataValue.optional() }).nullish(),
        })).max(100),
        has_more: z.boolean().optional(),
      }).nullish(),
    }).refine(object => object.metadata?.order_id !== undefined || object.metadata?.orderId !== undefined
      || ((object.object === 'refund' || object.object === 'charge') && !!object.payment_intent),
    { message: 'needs order_id (or orderId), the order the object belongs to', path: ['metadata'] }),
  }),
})

/** What a refund event's object must add: Stripe always sends a Refund's amount, currency and status. */
const StripeRefund = z.object({
  object: z.literal('refund'),
  amount: z.number().int().nonnegative(),
  currency: currencyCode,
  status: z.enum(Object.keys(refundStatusOf) as [keyof typeof refundStatusOf]),
})

export const stripeProvider: WebhookProvider = {
  name: 'stripe',
  signatureHeaders: ['stripe-signature'],
  verify: verifyStripeSignature,
  parse(json) {
    const parsed = StripeEvent.safeParse(json)
    if (!parsed.success) return { ok: false, reason: explainIssues(parsed.error) }
    const { id, type, data: { object } } = parsed.data
    const normalised = typeOf.get(type)
    if (!normalised) return { ok: false, reason: `event type "${type}" is not handled; subscribe this endpoint to ${[...typeOf.keys()].join(', ')} only` }
    const amountOf = (amount: number) => fromStripeAmount(amount, object.currency ?? '')
    // Empty for a dashboard refund: the receiver finds the order by the payment (PaymentEvent.orderId).
    const orderId = object.metadata?.order_id ?? object.metadata?.orderId ?? ''
    const currency = object.currency?.toUpperCase()
    if (normalised === 'refund.updated') {
      const refund = StripeRefund.safeParse(object)
      if (!refund.success) return { ok: false, reason: explainIssues({ issues: refund.error.issues.map(issue => ({ ...issue, path: ['data', 'object', ...issue.path] })) }) }
      const { amount, status } = refund.data
      return {
        ok: true,
        event: {
          eventId: id,
          type: normalised,
          orderId,
          paymentId: object.payment_intent ?? object.charge ?? undefined,
          currency,
          refund: { providerRefundId: object.id, ...(object.metadata?.refund_id && { refundId: object.metadata.refund_id }), amount: amountOf(amount), status: refundStatusOf[status] },
        },
      }
    }
    // A charge refers to its payment intent; an intent is the payment itself.
    const paymentId = object.payment_intent ?? object.id
    // A charge's `amount` is what was charged; `amount_refunded` is the total refunded so far, which
    // is less after a partial refund (`refunded` is true only once all of it is).
    const stripeAmount = normalised === 'payment.succeeded'
      ? object.amount_received ?? object.amount
      : normalised === 'payment.refunded'
        ? refundedOutsidePending(object)
        : object.amount
    const amount = stripeAmount === undefined || object.currency === undefined ? stripeAmount : amountOf(stripeAmount)
    const listedRefunds = normalised === 'payment.refunded' && object.currency !== undefined ? everyRefundListed(object, amountOf) : undefined
    const event: PaymentEvent = { eventId: id, type: normalised, orderId, paymentId, amount, currency, ...(listedRefunds && { listedRefunds }) }
    return { ok: true, event }
  },
}

/**
 * A charge's amount_refunded counts pending refunds (https://docs.stripe.com/api/charges/object#charge_object-amount_refunded).
 * A pending refund made elsewhere (the dashboard: no refund_id of ours) may still fail, so it is
 * left out of the total until its own refund event settles it; ours pending are held by the order
 * already. Only the refunds the charge lists can be left out: an API version that embeds none
 * gives the total as it is, and the refund events (refund.created, refund.updated) name each one.
 */
function refundedOutsidePending(charge: z.infer<typeof StripeEvent>['data']['object']): number | undefined {
  if (charge.amount_refunded === undefined) return undefined
  const pendingElsewhere = (charge.refunds?.data ?? [])
    .filter(refund => refundStatusOf[refund.status as keyof typeof refundStatusOf] === 'pending' && !refund.metadata?.refund_id)
    .reduce((sum, refund) => sum + refund.amount, 0)
  return Math.max(0, charge.amount_refunded - pendingElsewhere)
}

/**
 * The refunds a charge lists, when it lists every one (has_more false) and each with its id and a
 * known state: then the total is named part by part, and a refund the total counted is never taken
 * for another one that happens to fit (a total and the refund events arrive in any order).
 */
function everyRefundListed(charge: z.infer<typeof StripeEvent>['data']['object'], amountOf: (amount: number) => number): PaymentEvent['listedRefunds'] {
  const listed = charge.refunds
  if (!listed || listed.has_more !== false) return undefined
  const named: NonNullable<PaymentEvent['listedRefunds']> = []
  for (const refund of listed.data) {
    const status = refund.status && Object.hasOwn(refundStatusOf, refund.status) ? refundStatusOf[refund.status as keyof typeof refundStatusOf] : undefined
    if (!refund.id || !status) return undefined
    named.push({ providerRefundId: refund.id, ...(refund.metadata?.refund_id && { refundId: refund.metadata.refund_id }), amount: amountOf(refund.amount), status })
  }
  return named
}
