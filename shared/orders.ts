/**
 * An order as the API answers it, shared by the server (which builds it) and the checkout page
 * (which shows it). Amounts are integers in minor units of `currency`.
 */

export interface OrderItem { sku: string, quantity: number, unitPrice: number }

/** The provider's next step for the shopper, stored on the order once its payment was created. */
export type PaymentNextAction
  = | { type: 'mockpay' }
  /** Handed to Stripe.js (Payment Element) with the publishable key; the page never sees the secret key. */
    | { type: 'stripe_client_secret', clientSecret: string }
    | { type: 'midtrans_bank_transfer', bank: string, vaNumber: string, expiresAt?: string }
    | { type: 'midtrans_actions', actions: Array<{ name: string, method: string, url: string }>, expiresAt?: string }

/** The order's payment at its provider: null until the payment.create_intent job ran. */
export interface OrderPaymentView {
  provider: string
  id: string | null
  nextAction: PaymentNextAction | null
  /** After a definitive refusal: the shopper's words and the provider's code. */
  error: { code: string, message: string } | null
  /**
   * ready: the next step is known. refused: see `error`. retrying: the provider has not answered
   * yet (an outage); the payment is asked for again automatically, `lastError` says what went wrong
   * and `retryAt` when it is asked next.
   */
  status: 'ready' | 'refused' | 'retrying'
  lastError?: string
  retryAt?: string
}

/**
 * POST /api/orders answers this (201); GET /api/orders/:id adds the payment (OrderView). Type
 * aliases, not interfaces: a stored response body must be assignable to Record<string, unknown>.
 */
export type CreatedOrderView = {
  id: string
  object: 'order'
  status: string
  cartId: string
  currency: string
  amount: number
  paymentMethod: string
  items: OrderItem[]
  customer: { email: string }
  createdAt: string
}

export const refundReasons = ['requested_by_customer', 'duplicate', 'fraudulent'] as const
export type RefundReason = typeof refundReasons[number]
/** pending: held against the order's balance, not yet settled by the provider. failed: the provider refused; its amount is free again. */
export const refundStatuses = ['pending', 'succeeded', 'failed'] as const
export type RefundStatus = typeof refundStatuses[number]
/** api: POST /api/orders/:id/refunds (or the ops console). provider: made at the provider (its dashboard). automatic: a payment that arrived for a canceled order. */
export const refundSources = ['api', 'provider', 'automatic'] as const
export type RefundSource = typeof refundSources[number]

/** A refund of (part of) an order's payment, in the order's currency and units. */
export type RefundView = {
  id: string
  object: 'refund'
  orderId: string
  amount: number
  currency: string
  status: RefundStatus
  /** One of refundReasons, `order_canceled` for an automatic refund, or null. */
  reason: string | null
  source: RefundSource
  createdAt: string
}

/** GET /api/orders/:id. */
export type OrderView = CreatedOrderView & {
  paymentIntentId: string | null
  payment: OrderPaymentView | null
  /** Σ of the succeeded refunds, in the order's units. */
  amountRefunded: number
  /** Oldest first. */
  refunds: RefundView[]
}
