export interface PaymentIntentRequest {
  orderId: string
  amount: number
  currency: string
  /**
   * The provider's idempotency token (Stripe's Idempotency-Key): the order id, so however often the
   * job runs, the provider creates one intent.
   */
  idempotencyToken: string
}

export interface PaymentIntent {
  id: string
  status: string
}

/** What the worker needs from a payment provider; the simulated provider (mockpay) implements it too. */
export interface PaymentProvider {
  readonly name: string
  createIntent(request: PaymentIntentRequest, signal: AbortSignal): Promise<PaymentIntent>
}

/** The provider asked us to slow down (HTTP 429); the job snoozes for retryAfterMs. */
export class ProviderRateLimited extends Error {
  constructor(readonly retryAfterMs: number) {
    super(`payment provider rate limited; retry after ${retryAfterMs} ms`)
    this.name = 'ProviderRateLimited'
  }
}
