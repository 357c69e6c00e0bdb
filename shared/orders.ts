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

/** GET /api/orders/:id. */
export type OrderView = CreatedOrderView & {
  paymentIntentId: string | null
  payment: OrderPaymentView | null
}
