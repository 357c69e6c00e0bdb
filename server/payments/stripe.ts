import Stripe from 'stripe'
import type { AppConfig } from '../config'
import { fromStripeAmount, toStripeAmount } from './currencies'
import { type PaymentEventType, type PaymentProvider, PaymentRefused, type PaymentRequest, type PaymentState, ProviderUnavailable, type RefundRequest, REFUSED_DETAILS_MESSAGE, retryAfterMs } from './types'

/**
 * Stripe through its official client. One PaymentIntent per order: the create call carries an
 * Idempotency-Key derived from the order, so a re-run (crash, lost response, retry) gets the same
 * PaymentIntent back from Stripe. The client's own retries are off (`maxNetworkRetries: 0`; it still
 * resends once, under the same key, a request whose connection closed): the job runner retries,
 * with the same key, backoff and Retry-After.
 */

/**
 * Stripe keeps an idempotency key for at least 24 hours. A job still asking later than this (retried
 * for a day, or redriven from the dead letters) first searches for a PaymentIntent with the order's
 * metadata, or lists the payment's refunds (every page) for the refund's, so an expired key cannot
 * make a second one. Search lags writes by about a minute, which is harmless this long after the
 * first call. A key that answers a kept 500 is walked past the same way (askUnderKeys).
 */
const KEY_MEMORY_MS = 23 * 60 * 60 * 1000

type StripeConfig = Pick<AppConfig, 'STRIPE_SECRET_KEY' | 'STRIPE_API_BASE' | 'PAYMENT_PROVIDER_TIMEOUT_MS'>

export function stripeClientOptions(config: StripeConfig): ConstructorParameters<typeof Stripe>[1] {
  const base = config.STRIPE_API_BASE ? new URL(config.STRIPE_API_BASE) : undefined
  return {
    maxNetworkRetries: 0,
    timeout: config.PAYMENT_PROVIDER_TIMEOUT_MS,
    ...(base && { host: base.hostname, port: base.port || (base.protocol === 'https:' ? 443 : 80), protocol: base.protocol === 'https:' ? 'https' : 'http' }),
  }
}

export function createStripeProvider(config: StripeConfig): PaymentProvider {
  if (!config.STRIPE_SECRET_KEY) throw new Error('STRIPE_SECRET_KEY is unset although PAYMENT_PROVIDER=stripe')
  const stripe = new Stripe(config.STRIPE_SECRET_KEY, stripeClientOptions(config))
  return {
    name: 'stripe',
    async createPayment(request, signal) {
      signal.throwIfAborted()
      const earlier = Date.now() - request.firstAskedAt.getTime() > KEY_MEMORY_MS
        ? (await callStripe(() => stripe.paymentIntents.search({ query: `metadata['order_id']:'${request.orderId}'`, limit: 1 }))).data[0]
        : undefined
      const intent = earlier ?? await askUnderKeys(request.idempotencyKey, signal, idempotencyKey => callStripe(() => stripe.paymentIntents.create({
        amount: toStripeAmount(request.amount, request.currency),
        currency: request.currency.toLowerCase(),
        metadata: { order_id: request.orderId },
        receipt_email: request.customerEmail,
        automatic_payment_methods: { enabled: true },
      }, { idempotencyKey })), () => findIntentSince(stripe, request))
      if (!intent.client_secret) throw new ProviderUnavailable(`Stripe answered PaymentIntent ${intent.id} without a client_secret`)
      return { id: intent.id, nextAction: { type: 'stripe_client_secret', clientSecret: intent.client_secret } }
    },
    async readPayment({ paymentId }, signal) {
      signal.throwIfAborted()
      let intent: Stripe.PaymentIntent
      try {
        // The charge says what was refunded so far (amount_refunded).
        intent = await callStripe(() => stripe.paymentIntents.retrieve(paymentId, { expand: ['latest_charge'] }))
      }
      catch (error) {
        if (error instanceof PaymentRefused && error.refusal.code === 'resource_missing') return undefined
        throw error
      }
      return stateOfIntent(intent)
    },
    async refundPayment(request, signal) {
      signal.throwIfAborted()
      const earlier = Date.now() - request.firstAskedAt.getTime() > KEY_MEMORY_MS ? await findRefund(stripe, request) : undefined
      const refund = earlier ?? await askUnderKeys(request.idempotencyKey, signal, idempotencyKey => callStripe(() => stripe.refunds.create({
        payment_intent: request.paymentId,
        amount: toStripeAmount(request.amount, request.currency),
        // Stripe takes only its three reasons; ours (order_canceled) travels in the metadata.
        ...(isStripeReason(request.reason) && { reason: request.reason }),
        metadata: { order_id: request.orderId, refund_id: request.refundId, ...(request.reason && { reason: request.reason }) },
      }, { idempotencyKey })), () => findRefund(stripe, request))
      return { id: refund.id, status: refundStatusOf(refund.status), answer: refund as unknown as Record<string, unknown> }
    },
    async readRefund({ providerRefundId }, signal) {
      signal.throwIfAborted()
      try {
        const refund = await callStripe(() => stripe.refunds.retrieve(providerRefundId))
        return { id: refund.id, status: refundStatusOf(refund.status), answer: refund as unknown as Record<string, unknown> }
      }
      catch (error) {
        if (error instanceof PaymentRefused && error.refusal.code === 'resource_missing') return undefined
        throw error
      }
    },
    async cancelPayment({ orderId, paymentId }, signal) {
      signal.throwIfAborted()
      try {
        await callStripe(() => stripe.paymentIntents.cancel(paymentId, {}, { idempotencyKey: `order:${orderId}:cancel` }))
        return 'canceled'
      }
      catch (error) {
        if (!(error instanceof PaymentRefused)) throw error
        // Not cancelable (payment_intent_unexpected_state): the intent says why.
        const intent = await callStripe(() => stripe.paymentIntents.retrieve(paymentId))
        if (intent.status === 'succeeded') return 'succeeded'
        if (intent.status === 'canceled') return 'canceled'
        throw error
      }
    },
  }
}

/** Keys one creation is asked under before the job waits for Stripe to mend what it kept: the request's key, then `<key>:2` … */
const KEYS_PER_CREATION = 5

/** Clock skew allowed between this host and Stripe when listing the intents made since the first ask. */
const CLOCK_SKEW_SECONDS = 300

/**
 * Asks Stripe to create under the request's key. Stripe keeps a 500 under a key once its endpoint
 * began and answers it to every retry (https://docs.stripe.com/api/idempotent_requests), so a key
 * that answers a kept 500 would fail forever: what it may have made (the 500 can come after the
 * work) is looked up (`find`: by metadata) and, when Stripe made nothing, it is asked again under
 * the next key derived from the first, `refund:<id>:2`, `:3` …. Every run walks the same keys from
 * the first, each answering what it answered before, so a run that crashed after asking under one
 * key finds what that key made (its stored answer, or the look-up) and never makes a second.
 */
async function askUnderKeys<Made>(firstKey: string, signal: AbortSignal, ask: (idempotencyKey: string) => Promise<Made>, find: () => Promise<Made | undefined>): Promise<Made> {
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted()
    try {
      return await ask(attempt === 1 ? firstKey : `${firstKey}:${attempt}`)
    }
    catch (error) {
      if (!isKeptServerError(error) || attempt >= KEYS_PER_CREATION) throw error
      const made = await find()
      if (made) return made
    }
  }
}

/** A 5xx Stripe answered from its idempotency record (Idempotent-Replayed): asking again under that key can only answer it again. */
function isKeptServerError(error: unknown): boolean {
  const cause = error instanceof ProviderUnavailable ? error.cause : undefined
  return cause instanceof Stripe.errors.StripeError && (cause.statusCode ?? 0) >= 500 && cause.headers?.['idempotent-replayed'] === 'true'
}

/**
 * The order's PaymentIntent among those created since its payment was first asked for, every page:
 * the list endpoint, not search, as search lags writes by up to an hour during an outage
 * (https://docs.stripe.com/search#data-freshness) and a kept 500 is one.
 */
async function findIntentSince(stripe: Stripe, request: PaymentRequest): Promise<Stripe.PaymentIntent | undefined> {
  try {
    const since = Math.floor(request.firstAskedAt.getTime() / 1000) - CLOCK_SKEW_SECONDS
    for await (const intent of stripe.paymentIntents.list({ created: { gte: since }, limit: 100 })) {
      if (intent.metadata?.order_id === request.orderId) return intent
    }
    return undefined
  }
  catch (error) {
    throw classifyStripeError(error)
  }
}

/**
 * The refund Stripe made for ours, found by its metadata among every refund of the payment: the
 * list is paged (auto-pagination, `starting_after`; https://docs.stripe.com/api/pagination), since a
 * payment may have more refunds than one page holds.
 */
async function findRefund(stripe: Stripe, request: RefundRequest): Promise<Stripe.Refund | undefined> {
  try {
    for await (const refund of stripe.refunds.list({ payment_intent: request.paymentId, limit: 100 })) {
      if (refund.metadata?.refund_id === request.refundId) return refund
    }
    return undefined
  }
  catch (error) {
    throw classifyStripeError(error)
  }
}

const stripeReasons = new Set(['requested_by_customer', 'duplicate', 'fraudulent'])
const isStripeReason = (reason: string | null): reason is Stripe.RefundCreateParams.Reason => reason !== null && stripeReasons.has(reason)

/** requires_action waits for the customer (some payment methods): pending until Stripe settles it. */
const refundStatusOf = (status: string | null): 'pending' | 'succeeded' | 'failed' =>
  status === 'succeeded' ? 'succeeded' : status === 'failed' || status === 'canceled' ? 'failed' : 'pending'

/** What a PaymentIntent's status means for the order. */
function stateOfIntent(intent: Stripe.PaymentIntent): PaymentState {
  const failed = intent.status === 'canceled' || (intent.status === 'requires_payment_method' && intent.last_payment_error)
  const type: PaymentEventType = intent.status === 'succeeded' ? 'payment.succeeded' : failed ? 'payment.failed' : 'payment.updated'
  const providerStatus = intent.status === 'requires_payment_method' && intent.last_payment_error ? 'payment_failed' : intent.status
  return {
    paymentId: intent.id,
    providerStatus,
    type,
    amount: fromStripeAmount(type === 'payment.succeeded' ? intent.amount_received : intent.amount, intent.currency),
    currency: intent.currency.toUpperCase(),
    refundedAmount: typeof intent.latest_charge === 'object' && intent.latest_charge ? fromStripeAmount(intent.latest_charge.amount_refunded, intent.currency) : undefined,
    answer: intent as unknown as Record<string, unknown>,
  }
}

async function callStripe<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  }
  catch (error) {
    throw classifyStripeError(error)
  }
}

/**
 * Stripe's documented error types, as the job runner needs them: card errors and invalid requests
 * (other than an idempotent request still in flight, 409) are final; rate limits, API errors,
 * connection problems and authentication (a key being fixed) are worth another attempt.
 */
export function classifyStripeError(error: unknown): Error {
  if (!(error instanceof Stripe.errors.StripeError)) return error instanceof Error ? error : new Error(String(error))
  const status = error.statusCode
  const wait = retryAfterMs(error.headers?.['retry-after'])
  if (error instanceof Stripe.errors.StripeCardError) {
    return new PaymentRefused({ code: error.decline_code || error.code || 'card_declined', message: `${error.message} Try another card or payment method.`, providerMessage: error.message })
  }
  if (status === 409 || status === 429 || (status !== undefined && status >= 500) || error instanceof Stripe.errors.StripeConnectionError
    || error instanceof Stripe.errors.StripeAuthenticationError || error instanceof Stripe.errors.StripePermissionError || status === undefined) {
    return new ProviderUnavailable(`Stripe ${error.rawType ?? error.type}${status ? ` (HTTP ${status})` : ''}: ${error.message}`, wait, { cause: error })
  }
  return new PaymentRefused({ code: error.code || error.rawType || 'invalid_request_error', message: REFUSED_DETAILS_MESSAGE, providerMessage: error.message })
}
