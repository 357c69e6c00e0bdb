import { createHmac, randomBytes } from 'node:crypto'
import type http from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type Answer, canonicalJson, CONTROL_PREFIX, control, controlAnswer, controlParameters, drop, type FaultTarget, header, holdAnswer, jsonAnswer, type ProviderCall,
  type ProviderFault, readBody, type ScriptedFault, serve, StandInRefusal, takeFault, type WebhookDelivery, webhookSender, writeAnswer,
} from './common'

/**
 * A local stand-in for the part of Stripe's HTTP API the app uses (PaymentIntents: create,
 * retrieve, search, list, cancel; Refunds: create, retrieve, list), answering what the official client
 * sends with the shapes Stripe documents, including its idempotency rules. Tests script faults per
 * request (a status, a lost response, a dropped connection, a slow answer, a 500 kept under the
 * Idempotency-Key) and move intents and refunds as a shopper's payment and the banks would; a
 * control surface under /_stand-in does the same over HTTP. Each change makes the Stripe events
 * Stripe documents for it (`events`); with a webhook URL each is also sent, signed, and can be held
 * back, then released reordered or twice, as Stripe does not promise order or single delivery.
 *
 * Refunds as Stripe documents them (https://docs.stripe.com/refunds, "Failed refunds" and the
 * Refund object's `status`, https://docs.stripe.com/api/refunds/object): `pending` →
 * `succeeded` | `failed` | `canceled` (Stripe cancels one awaiting action, called off:
 * https://docs.stripe.com/api/refunds/cancel; the stand-in does not model requires_action and lets
 * a pending one be canceled instead); a charge's `amount_refunded` counts every refund that has not
 * failed or been canceled, pending ones included; a failed or canceled refund gives its amount back.
 */

export interface StandInPaymentIntent {
  id: string
  object: 'payment_intent'
  amount: number
  amount_capturable: number
  amount_received: number
  automatic_payment_methods: { enabled: boolean } | null
  canceled_at: number | null
  cancellation_reason: string | null
  capture_method: string
  client_secret: string
  confirmation_method: string
  created: number
  currency: string
  customer: string | null
  description: string | null
  last_payment_error: { type: string, code: string, decline_code?: string, message: string } | null
  latest_charge: string | null
  livemode: false
  metadata: Record<string, string>
  payment_method: string | null
  payment_method_types: string[]
  receipt_email: string | null
  status: 'requires_payment_method' | 'requires_confirmation' | 'requires_action' | 'processing' | 'requires_capture' | 'canceled' | 'succeeded'
}

export interface StandInRefund {
  id: string
  object: 'refund'
  amount: number
  balance_transaction: null
  charge: string
  created: number
  currency: string
  /** Set when the refund failed: `declined`, `expired_or_canceled_card`, `lost_or_stolen_card`, … */
  failure_reason?: string
  metadata: Record<string, string>
  payment_intent: string
  payment_method: string | null
  reason: 'duplicate' | 'fraudulent' | 'requested_by_customer' | null
  receipt_number: null
  source_transfer_reversal: null
  status: StandInRefundStatus
  transfer_reversal: null
}

/** https://docs.stripe.com/api/refunds/object#refund_object-status (requires_action is not modelled). */
export type StandInRefundStatus = 'pending' | 'succeeded' | 'failed' | 'canceled'
/** What a pending refund can become. */
export type RefundOutcome = Exclude<StandInRefundStatus, 'pending'>

/** A PaymentIntent's charge as Stripe shows it (`expand[]=latest_charge`), refunds newest first. */
export interface StandInCharge {
  id: string
  object: 'charge'
  amount: number
  amount_captured: number
  /**
   * What refunds that have not failed (or been canceled) take back: pending ones count, so the total
   * rises when a refund is made and falls again if it fails
   * (https://docs.stripe.com/api/charges/object#charge_object-amount_refunded).
   */
  amount_refunded: number
  balance_transaction: null
  captured: true
  created: number
  currency: string
  customer: string | null
  description: string | null
  failure_code: null
  failure_message: null
  livemode: false
  /** The intent's, as Stripe copies it onto the charge. */
  metadata: Record<string, string>
  paid: true
  payment_intent: string
  payment_method: string
  receipt_email: string | null
  /** All of it refunded (a partial refund leaves it false). */
  refunded: boolean
  /** The newest CHARGE_REFUNDS_SHOWN refunds, has_more when there are others (a list object: https://docs.stripe.com/api/pagination). */
  refunds: { object: 'list', data: StandInRefund[], has_more: boolean, url: string }
  status: 'succeeded'
}

export interface StripeEvent {
  id: string
  object: 'event'
  api_version: string
  created: number
  data: { object: StandInPaymentIntent | StandInCharge | StandInRefund }
  livemode: false
  pending_webhooks: number
  /** The API request that caused the event; nulls for what the shopper, a bank or the dashboard did. */
  request: { id: string | null, idempotency_key: string | null }
  type: string
}

/** A refund the stand-in made, and how it was asked for. */
export interface RefundRecord {
  refund: StandInRefund
  /** The Idempotency-Key of the POST /v1/refunds that created it. */
  idempotencyKey?: string
  /** Made with `dashboardRefund` (or the control surface), as in Stripe's dashboard: no API call, no metadata. */
  dashboard: boolean
}

/**
 * A fault only Stripe's API has, beside the shared ones: a 5xx that Stripe keeps under the request's
 * Idempotency-Key and answers again to every retry under it ("Retries with the same key return the
 * saved response, including 500 errors": https://docs.stripe.com/api/idempotent_requests). With
 * `performed` the work was done first (the refund or intent exists although the answer is an error);
 * without, nothing was made. A request without a key is answered the status, nothing kept.
 */
export interface StoredErrorFault { kind: 'stored-error', status: number, performed?: boolean }

export type StripeFault = ProviderFault | StoredErrorFault

/** A scripted fault, for requests under one Idempotency-Key (or keys the pattern matches) when `idempotencyKey` is set. */
export interface StripeScriptedFault extends ScriptedFault<StripeFault> {
  idempotencyKey?: string | RegExp
}

/**
 * How held events are sent when released: as they were made, newest first, or each twice. Stripe
 * does not guarantee the order of events and may send one more than once
 * (https://docs.stripe.com/webhooks#event-ordering, #handle-duplicate-events).
 */
export interface ReleaseOptions {
  order?: 'as-made' | 'reversed'
  /** Each event is sent twice (the second a redelivery, same event id), as Stripe may. */
  duplicate?: boolean
}

export interface StripeApi {
  /** http://127.0.0.1:PORT */
  url: string
  port: number
  calls: ProviderCall[]
  /**
   * Faults applied FIFO: each request takes the first one whose `match` fits it (create, refund,
   * cancel: those POSTs; read: any GET) and, when it names one, whose `idempotencyKey` is the
   * request's; a sticky one stays.
   */
  script: StripeScriptedFault[]
  /** Every intent created, by id, in creation order. */
  intents: Map<string, StandInPaymentIntent>
  /** Every refund made, by id, in creation order. */
  refunds: Map<string, StandInRefund>
  /** The shopper paid: succeeded, amount_received = amount, a latest_charge. */
  succeed(intentId: string): StandInPaymentIntent
  /** The shopper's payment was declined: back to requires_payment_method with a card_error. */
  fail(intentId: string, message?: string): StandInPaymentIntent
  /** Canceled as the cancel endpoint would; refused (StandInRefusal) for a succeeded or canceled intent. */
  cancel(intentId: string, reason?: string): StandInPaymentIntent
  /** The intent's latest charge as retrieve with expand[]=latest_charge shows it; undefined before it is paid. */
  charge(intentId: string): StandInCharge | undefined
  /**
   * A refund made in Stripe's dashboard (no API call, no metadata): `amount` defaults to what remains;
   * `pending` leaves it pending until settleRefund (succeeded at once by default; a refund stays
   * pending while the balance cannot cover it or the charge has not settled: the Refund object's
   * `pending_reason`, https://docs.stripe.com/api/refunds/object).
   * Refused (StandInRefusal) as the API would refuse it.
   */
  dashboardRefund(intentId: string, amount?: number, options?: { pending?: boolean }): StandInRefund
  /** The next `count` refunds made through the API (all of them by default) are `pending` until settleRefund. */
  pendRefunds(count?: number): void
  /**
   * A pending refund settles: refund.updated, and refund.failed when it failed. A failed one
   * (failure_reason `declined`) or canceled one gives its amount back to the charge.
   */
  settleRefund(refundId: string, outcome: RefundOutcome): StandInRefund
  /** Every refund made, oldest first, with the Idempotency-Key it was created under. */
  createdRefunds(): RefundRecord[]
  /** How many requests carried each Idempotency-Key to `target`'s endpoint, replays, faults and refusals included. */
  idempotencyKeyUses(target: 'create' | 'refund' | 'cancel'): Map<string, number>
  /** Σ of the intent's refunds that have not failed (the charge's amount_refunded): never more than its amount_received. */
  refundedTotal(intentId: string): number
  /** Stripe may prune a key once it is 24 hours old (https://docs.stripe.com/api/idempotent_requests): forgetting them all is what a request a day later meets. */
  forgetIdempotencyKeys(): void
  /** A Stripe Event about an intent (pi_…), charge (ch_…) or refund (re_…) as it is now (a copy), for a test to sign and post as a webhook. */
  event(objectId: string, type: string): StripeEvent
  /**
   * Every event the stand-in made, oldest first, with or without a webhook URL: payment_intent.succeeded
   * and .payment_failed; for each refund refund.created and charge.refunded (the charge as it is then,
   * amount_refunded counting pending refunds), then refund.updated when it settles and refund.failed
   * when it fails (https://docs.stripe.com/api/events/types). A test may post them in any order, or twice.
   */
  events: StripeEvent[]
  /** Each signed event sent to the webhook URL (none without one). */
  webhooks: WebhookDelivery[]
  /** Resolves once every webhook sent so far is delivered or has run out of attempts. */
  webhooksIdle(): Promise<void>
  /** Events made from now on are kept back (listed in `events`), not sent, until releaseWebhooks (see ReleaseOptions). */
  holdWebhooks(): void
  /** Sends the held events (as made by default, or reversed; each twice with `duplicate`) and stops holding; how many were sent. */
  releaseWebhooks(options?: ReleaseOptions): number
  /** Sends an event made earlier again, the same id and body (Stripe's redelivery, https://docs.stripe.com/webhooks#retries). */
  redeliver(eventId: string): void
  /** Forgets intents, refunds, idempotency keys, calls, events, webhooks and the script; refunds succeed at once again, webhooks are not held. */
  reset(): void
  close(): Promise<void>
}

export interface StripeApiOptions {
  /** The secret key the API accepts (Bearer or Basic). */
  secretKey: string
  /** 0 (the default): one the system picks. */
  port?: number
  /** Sends every event (see StripeApi.events) here, signed with `secret` (Stripe-Signature). */
  webhook?: { url: string, secret: string }
}

/** Stripe-Signature for `payload`: `t=…,v1=…`, the HMAC-SHA256 of `${t}.${payload}` keyed with the secret string as is. */
export function stripeSignature(secret: string, payload: string, timestamp = Math.floor(Date.now() / 1000)): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${payload}`).digest('hex')}`
}

/** Used in events when no request has said which API version it speaks (Stripe-Version). */
const FALLBACK_API_VERSION = '2026-10-28.endive'
/** Stripe's ceiling for an amount in the smallest currency unit (its "amount_too_large"). */
const MAX_AMOUNT = 999_999_999
const MAX_IDEMPOTENCY_KEY_LENGTH = 255

/** What PaymentIntent create accepts; anything else is refused as Stripe refuses an unknown parameter. */
const CREATE_PARAMETERS = new Set([
  'amount', 'currency', 'automatic_payment_methods', 'capture_method', 'confirm', 'confirmation_method', 'customer', 'description',
  'error_on_requires_action', 'expand', 'mandate_data', 'metadata', 'off_session', 'on_behalf_of', 'payment_method',
  'payment_method_configuration', 'payment_method_data', 'payment_method_options', 'payment_method_types', 'radar_options',
  'receipt_email', 'return_url', 'setup_future_usage', 'shipping', 'statement_descriptor', 'statement_descriptor_suffix',
  'transfer_data', 'transfer_group', 'use_stripe_sdk', 'application_fee_amount',
])
const REFUND_PARAMETERS = new Set([
  'amount', 'charge', 'currency', 'customer', 'expand', 'instructions_email', 'metadata', 'origin', 'payment_intent', 'reason',
  'refund_application_fee', 'reverse_transfer',
])
const REFUND_REASONS = new Set(['duplicate', 'fraudulent', 'requested_by_customer'])
const CANCEL_PARAMETERS = new Set(['cancellation_reason', 'expand'])
const CANCELLATION_REASONS = new Set(['abandoned', 'duplicate', 'fraudulent', 'requested_by_customer'])
/** The statuses Stripe cancels from. */
const CANCELABLE = ['requires_payment_method', 'requires_capture', 'requires_confirmation', 'requires_action', 'processing']
/** The test PaymentMethod Stripe declines on confirmation. */
const DECLINED_TEST_PAYMENT_METHOD = 'pm_card_chargeDeclined'
const STRIPE_USER_AGENT = 'Stripe/1.0 (+https://stripe.com/docs/webhooks)'

interface IdempotencyEntry {
  /** Method, path and parameters of the first request: a different one under the key is refused. */
  fingerprint: string
  /** Unset while the first request is still being handled (a second one then gets 409). */
  answer?: Answer
  requestId?: string
}

interface ChargeRecord { id: string, payment_intent: string, payment_method: string, created: number }

type EventRequest = StripeEvent['request']

type Route
  = | { kind: 'create' } | { kind: 'retrieve', id: string } | { kind: 'search' } | { kind: 'list' } | { kind: 'cancel', id: string }
    | { kind: 'refund' } | { kind: 'refund-retrieve', id: string } | { kind: 'refund-list' }

export async function startStripeApi({ secretKey, port = 0, webhook }: StripeApiOptions): Promise<StripeApi> {
  const calls: ProviderCall[] = []
  const script: StripeScriptedFault[] = []
  const events: StripeEvent[] = []
  /** Events kept back while webhooks are held; undefined: each is sent as it is made. */
  let held: StripeEvent[] | undefined
  const intents = new Map<string, StandInPaymentIntent>()
  const charges = new Map<string, ChargeRecord>()
  const refunds = new Map<string, StandInRefund>()
  const refundLog: Array<{ id: string, idempotencyKey?: string, dashboard: boolean }> = []
  const idempotency = new Map<string, IdempotencyEntry>()
  let pendingRefundsLeft = 0
  let lastApiVersion: string | undefined
  let sender = webhook && webhookSender(webhook.url)

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const raw = await readBody(req)
    const url = new URL(req.url ?? '/', 'http://stand-in')
    const method = req.method ?? 'GET'
    if (url.pathname === CONTROL_PREFIX || url.pathname.startsWith(`${CONTROL_PREFIX}/`)) return writeAnswer(res, controlRoute(method, url.pathname, controlParameters(url, raw)))
    const idempotencyKey = header(req, 'idempotency-key')
    lastApiVersion = header(req, 'stripe-version') ?? lastApiVersion
    const call: ProviderCall = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      idempotencyKey,
      body: parseForm(raw),
      authorization: header(req, 'authorization'),
      headers: req.headers,
      at: Date.now(),
    }
    calls.push(call)
    const route = routeOf(method, url.pathname)
    const fault = takeFault(script, faultTargetOf(method, route), entry => forKey(entry, idempotencyKey))
    const requestId = newId('req', 14)
    const send = async (answer: Answer, replayOf?: IdempotencyEntry) => {
      const headers: Record<string, string> = { ...answer.headers, 'request-id': requestId }
      if (call.headers['stripe-version']) headers['stripe-version'] = String(call.headers['stripe-version'])
      if (method === 'POST' && idempotencyKey) headers['idempotency-key'] = idempotencyKey
      if (replayOf) {
        headers['idempotent-replayed'] = 'true'
        if (replayOf.requestId) headers['original-request'] = replayOf.requestId
      }
      if (fault?.kind === 'drop-after') return drop(req, call)
      if (fault?.kind === 'hold-answer' && !await holdAnswer(req, call, fault.ms)) return
      call.answered = answer.status
      writeAnswer(res, { ...answer, headers })
    }

    if (fault?.kind === 'drop-before') return drop(req, call)
    const keyed = method === 'POST' && idempotencyKey !== undefined
    if (fault?.kind === 'status') return send(scriptedStatus(fault))
    if (fault?.kind === 'stored-error' && !keyed) return send(scriptedStatus({ kind: 'status', status: fault.status }))

    const authFailure = authenticate(header(req, 'authorization'), secretKey)
    if (authFailure) return send(authFailure)
    if (!route) {
      return send(stripeError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${url.pathname}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.` }))
    }
    const request: EventRequest = { id: requestId, idempotency_key: idempotencyKey ?? null }
    const perform = (): Answer => {
      const query = parseForm(url.search.slice(1))
      switch (route.kind) {
        case 'create': return create(call.body, request)
        case 'retrieve': return retrieve(route.id, query)
        case 'search': return search(call.query)
        case 'list': return listIntents(query)
        case 'cancel': return cancelRequest(route.id, call.body)
        case 'refund': return refundRequest(call.body, request, idempotencyKey)
        case 'refund-retrieve': return retrieveRefund(route.id)
        case 'refund-list': return listRefunds(query)
      }
    }

    if (method !== 'POST' || idempotencyKey === undefined) {
      if (fault?.kind === 'delay') await sleep(fault.ms)
      return send(perform())
    }
    if (idempotencyKey.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      return send(stripeError(400, { type: 'invalid_request_error', message: `Invalid idempotency key: the key must be at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters long (it is ${idempotencyKey.length}).` }))
    }
    // Keys are per API key, as at Stripe.
    const scopedKey = `${secretKey}\u0000${idempotencyKey}`
    const fingerprint = canonicalJson({ method, path: url.pathname, body: call.body })
    const earlier = idempotency.get(scopedKey)
    if (earlier && earlier.fingerprint !== fingerprint) {
      return send(stripeError(400, {
        type: 'idempotency_error',
        message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
      }))
    }
    if (earlier && !earlier.answer) {
      return send(stripeError(409, {
        type: 'idempotency_error',
        code: 'idempotency_key_in_use',
        message: 'There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): '
          + `${idempotencyKey}. Please try again later.`,
      }))
    }
    if (earlier?.answer) {
      if (fault?.kind === 'delay') await sleep(fault.ms)
      return send(earlier.answer, earlier)
    }
    // Held as in progress from here: a second request under the key meanwhile gets 409.
    const entry: IdempotencyEntry = { fingerprint }
    idempotency.set(scopedKey, entry)
    let answer: Answer
    try {
      if (fault?.kind === 'delay') await sleep(fault.ms)
      if (fault?.kind === 'stored-error' && fault.performed) perform()
      answer = fault?.kind === 'stored-error' ? scriptedStatus({ kind: 'status', status: fault.status }) : perform()
    }
    catch (error) {
      idempotency.delete(scopedKey)
      throw error
    }
    // Stripe keeps what the endpoint answered once it started executing: successes, the refusals it
    // decided on, and a scripted stored-error's 5xx, replayed to every retry under the key
    // (https://docs.stripe.com/api/idempotent_requests). Rate limits and conflicts are decided before
    // the endpoint runs, and this stand-in's own failures are not the endpoint's: a retry runs again.
    const kept = fault?.kind === 'stored-error' || (answer.status < 500 && answer.status !== 429 && answer.status !== 409)
    if (kept) Object.assign(entry, { answer, requestId })
    else idempotency.delete(scopedKey)
    return send(answer)
  }

  function create(body: Record<string, unknown>, request: EventRequest): Answer {
    const unknownParameter = Object.keys(body).find(name => !CREATE_PARAMETERS.has(name))
    if (unknownParameter) return invalidRequest(unknownParameter, `Received unknown parameter: ${unknownParameter}`, 'parameter_unknown')
    const { amount: amountText, currency: currencyText } = body
    if (amountText === undefined || amountText === '') return invalidRequest('amount', 'Missing required param: amount.', 'parameter_missing')
    if (typeof amountText !== 'string' || !/^-?\d+$/.test(amountText)) return invalidRequest('amount', `Invalid integer: ${String(amountText)}`, 'parameter_invalid_integer')
    const amount = Number(amountText)
    if (amount < 1) return invalidRequest('amount', 'This value must be greater than or equal to 1.', 'parameter_invalid_integer')
    if (currencyText === undefined || currencyText === '') return invalidRequest('currency', 'Missing required param: currency.', 'parameter_missing')
    if (typeof currencyText !== 'string' || !/^[a-z]{3}$/i.test(currencyText)) {
      return invalidRequest('currency', `Invalid currency: ${String(currencyText)}. Stripe currently supports these currencies: usd, eur, gbp, idr, jpy, sgd, …`)
    }
    const currency = currencyText.toLowerCase()
    if (amount > MAX_AMOUNT) return invalidRequest('amount', `Amount must be no more than ${MAX_AMOUNT.toLocaleString('en-US')} (in the smallest unit of ${currency}).`, 'amount_too_large')
    const metadata = body.metadata ?? {}
    if (typeof metadata !== 'object' && metadata !== '') return invalidRequest('metadata', 'Invalid object', 'parameter_invalid_empty')
    const automatic = body.automatic_payment_methods as Record<string, unknown> | undefined
    const paymentMethod = typeof body.payment_method === 'string' ? body.payment_method : null
    const confirm = body.confirm === 'true'
    if (confirm && !paymentMethod) {
      return invalidRequest('payment_method', 'You cannot confirm this PaymentIntent because it\'s missing a payment method. To confirm the PaymentIntent with a payment method, pass `payment_method`.', 'payment_intent_unexpected_state')
    }

    const id = newId('pi', 24)
    const intent: StandInPaymentIntent = {
      id,
      object: 'payment_intent',
      amount,
      amount_capturable: 0,
      amount_received: 0,
      automatic_payment_methods: automatic ? { enabled: automatic.enabled === 'true' } : null,
      canceled_at: null,
      cancellation_reason: null,
      capture_method: typeof body.capture_method === 'string' ? body.capture_method : 'automatic_async',
      client_secret: `${id}_secret_${randomAlphanumeric(25)}`,
      confirmation_method: 'automatic',
      created: nowSeconds(),
      currency,
      customer: typeof body.customer === 'string' ? body.customer : null,
      description: typeof body.description === 'string' ? body.description : null,
      last_payment_error: null,
      latest_charge: null,
      livemode: false,
      metadata: typeof metadata === 'object' ? stringValues(metadata as Record<string, unknown>) : {},
      payment_method: paymentMethod,
      payment_method_types: Array.isArray(body.payment_method_types) ? body.payment_method_types.map(String) : ['card'],
      receipt_email: typeof body.receipt_email === 'string' && body.receipt_email !== '' ? body.receipt_email : null,
      status: paymentMethod ? 'requires_confirmation' : 'requires_payment_method',
    }
    intents.set(id, intent)
    if (confirm && paymentMethod === DECLINED_TEST_PAYMENT_METHOD) {
      const declined = declineOf(intent, 'Your card was declined.', request)
      return stripeError(402, { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: declined.message, payment_intent: structuredClone(intent) })
    }
    if (confirm) succeedIntent(intent, request)
    return stripeJson(200, intent)
  }

  function retrieve(id: string, query: Record<string, unknown>): Answer {
    const intent = intents.get(id)
    if (!intent) return stripeError(404, { type: 'invalid_request_error', code: 'resource_missing', param: 'intent', message: `No such payment_intent: '${id}'` })
    const expand = Array.isArray(query.expand) ? query.expand.map(String) : []
    const unexpandable = expand.find(field => field !== 'latest_charge')
    if (unexpandable) return invalidRequest('expand', `This property cannot be expanded (${unexpandable}).`)
    const charge = expand.includes('latest_charge') && intent.latest_charge ? charges.get(intent.latest_charge) : undefined
    return stripeJson(200, charge ? { ...intent, latest_charge: chargeView(charge) } : intent)
  }

  /**
   * Stripe's search query language, only the form `metadata['key']:'value'` (either quote); newest
   * first, `limit` (1–100, default 10) a page, `page` the cursor the previous page's `next_page` gave
   * (https://docs.stripe.com/search#search-pagination).
   */
  function search(query: Record<string, string>): Answer {
    if (!query.query) return invalidRequest('query', 'Missing required param: query.', 'parameter_missing')
    const equality = /^\s*metadata\[(['"])(.+?)\1\]\s*:\s*(['"])(.*)\3\s*$/.exec(query.query)
    if (!equality) return invalidRequest('query', `The stand-in understands only metadata['key']:'value' queries, not: ${query.query}`)
    const limit = query.limit === undefined ? 10 : Number(query.limit)
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) return invalidRequest('limit', 'This value must be between 1 and 100.', 'parameter_invalid_integer')
    const offset = query.page === undefined ? 0 : Number(/^page_(\d+)$/.exec(query.page)?.[1] ?? Number.NaN)
    if (!Number.isInteger(offset)) return invalidRequest('page', `Invalid page: ${query.page}`)
    const [, , key = '', , value] = equality
    const matching = [...intents.values()].filter(intent => intent.metadata[key] === value).reverse()
    const hasMore = matching.length > offset + limit
    return stripeJson(200, {
      object: 'search_result', data: matching.slice(offset, offset + limit), has_more: hasMore, next_page: hasMore ? `page_${offset + limit}` : null,
      url: '/v1/payment_intents/search',
    })
  }

  function cancelRequest(id: string, body: Record<string, unknown>): Answer {
    const unknownParameter = Object.keys(body).find(name => !CANCEL_PARAMETERS.has(name))
    if (unknownParameter) return invalidRequest(unknownParameter, `Received unknown parameter: ${unknownParameter}`, 'parameter_unknown')
    const intent = intents.get(id)
    if (!intent) return stripeError(404, { type: 'invalid_request_error', code: 'resource_missing', param: 'intent', message: `No such payment_intent: '${id}'` })
    const reason = body.cancellation_reason
    if (reason !== undefined && !(typeof reason === 'string' && CANCELLATION_REASONS.has(reason))) {
      return invalidRequest('cancellation_reason', `Invalid cancellation_reason: must be one of ${[...CANCELLATION_REASONS].join(', ')}`)
    }
    const refusal = cancelRefusal(intent)
    if (refusal) return stripeError(400, { type: 'invalid_request_error', code: 'payment_intent_unexpected_state', message: refusal, payment_intent: structuredClone(intent) })
    return stripeJson(200, cancelIntent(intent, reason ?? null))
  }

  function refundRequest(body: Record<string, unknown>, request: EventRequest, idempotencyKey: string | undefined): Answer {
    const unknownParameter = Object.keys(body).find(name => !REFUND_PARAMETERS.has(name))
    if (unknownParameter) return invalidRequest(unknownParameter, `Received unknown parameter: ${unknownParameter}`, 'parameter_unknown')
    let intent: StandInPaymentIntent | undefined
    if (typeof body.payment_intent === 'string' && body.payment_intent !== '') {
      intent = intents.get(body.payment_intent)
      if (!intent) return invalidRequest('payment_intent', `No such payment_intent: '${body.payment_intent}'`, 'resource_missing')
    }
    else if (typeof body.charge === 'string' && body.charge !== '') {
      const charge = charges.get(body.charge)
      if (!charge) return invalidRequest('charge', `No such charge: '${body.charge}'`, 'resource_missing')
      intent = intents.get(charge.payment_intent)
    }
    if (!intent) return invalidRequest('payment_intent', 'One of `charge` or `payment_intent` is required.', 'parameter_missing')
    let amount: number | undefined
    if (body.amount !== undefined) {
      if (typeof body.amount !== 'string' || !/^\d+$/.test(body.amount) || Number(body.amount) < 1) return invalidRequest('amount', 'Invalid positive integer', 'parameter_invalid_integer')
      amount = Number(body.amount)
    }
    const reason = body.reason === undefined || body.reason === '' ? null : body.reason
    if (reason !== null && !(typeof reason === 'string' && REFUND_REASONS.has(reason))) {
      return invalidRequest('reason', `Invalid reason: must be one of ${[...REFUND_REASONS].join(', ')}`)
    }
    const metadata = typeof body.metadata === 'object' && body.metadata !== null ? stringValues(body.metadata as Record<string, unknown>) : {}
    const refusal = refundRefusal(intent, amount)
    if (refusal) return stripeError(400, refusal)
    const status: StandInRefundStatus = pendingRefundsLeft > 0 ? 'pending' : 'succeeded'
    if (status === 'pending') pendingRefundsLeft--
    const refund = makeRefund(intent, amount, { reason: reason as StandInRefund['reason'], metadata, status, request })
    refundLog.push({ id: refund.id, idempotencyKey, dashboard: false })
    return stripeJson(200, refund)
  }

  /** Stripe's error (answered 400) for a refund the charge cannot take, or undefined. */
  function refundRefusal(intent: StandInPaymentIntent, amount: number | undefined): { type: 'invalid_request_error', code: string, param?: string, message: string } | undefined {
    const charge = intent.latest_charge ? charges.get(intent.latest_charge) : undefined
    if (intent.status !== 'succeeded' || !charge) {
      return { type: 'invalid_request_error', code: 'charge_not_refundable', param: 'payment_intent', message: `This PaymentIntent (${intent.id}) does not have a successful charge to refund.` }
    }
    const remaining = intent.amount_received - refundedTotal(intent.id)
    if (remaining <= 0) return { type: 'invalid_request_error', code: 'charge_already_refunded', message: `Charge ${charge.id} has already been refunded.` }
    if (amount !== undefined && amount > remaining) {
      const message = `Refund amount (${money(amount, intent.currency)}) is greater than unrefunded amount on charge (${money(remaining, intent.currency)})`
      return { type: 'invalid_request_error', code: 'amount_too_large', param: 'amount', message }
    }
    return undefined
  }

  function makeRefund(intent: StandInPaymentIntent, amount: number | undefined, details: Pick<StandInRefund, 'reason' | 'metadata' | 'status'> & { request: EventRequest }): StandInRefund {
    const charge = charges.get(intent.latest_charge!)!
    const refund: StandInRefund = {
      id: newId('re', 24),
      object: 'refund',
      amount: amount ?? intent.amount_received - refundedTotal(intent.id),
      balance_transaction: null,
      charge: charge.id,
      created: nowSeconds(),
      currency: intent.currency,
      metadata: details.metadata,
      payment_intent: intent.id,
      payment_method: intent.payment_method,
      reason: details.reason,
      receipt_number: null,
      source_transfer_reversal: null,
      status: details.status,
      transfer_reversal: null,
    }
    refunds.set(refund.id, refund)
    // Both, for every refund, the dashboard's too: refund.created names it, charge.refunded gives
    // the charge with its new total (https://docs.stripe.com/api/events/types#event_types-charge.refunded).
    emit('refund.created', refund, details.request)
    emit('charge.refunded', chargeView(charge), details.request)
    return refund
  }

  function retrieveRefund(id: string): Answer {
    const refund = refunds.get(id)
    if (!refund) return stripeError(404, { type: 'invalid_request_error', code: 'resource_missing', param: 'id', message: `No such refund: '${id}'` })
    return stripeJson(200, refund)
  }

  /** Refunds newest first, filtered by payment_intent or charge, a page at a time (listPage). */
  function listRefunds(query: Record<string, unknown>): Answer {
    const matching = [...refunds.values()].reverse()
      .filter(refund => query.payment_intent === undefined || refund.payment_intent === query.payment_intent)
      .filter(refund => query.charge === undefined || refund.charge === query.charge)
    return listPage(matching, query, '/v1/refunds')
  }

  /** PaymentIntents newest first, `created[gte|gt|lte|lt]` (seconds) filtering them, a page at a time (listPage). */
  function listIntents(query: Record<string, unknown>): Answer {
    const created = typeof query.created === 'object' && query.created !== null ? query.created as Record<string, unknown> : {}
    const bound = (name: string) => created[name] === undefined ? undefined : Number(created[name])
    const [gte, gt, lte, lt] = ['gte', 'gt', 'lte', 'lt'].map(bound)
    const matching = [...intents.values()].reverse().filter(intent => (gte === undefined || intent.created >= gte) && (gt === undefined || intent.created > gt)
      && (lte === undefined || intent.created <= lte) && (lt === undefined || intent.created < lt))
    return listPage(matching, query, '/v1/payment_intents')
  }

  /**
   * One page of a list, newest first: `limit` (1–100, default 10) objects with has_more;
   * `starting_after` pages on, `ending_before` back, never both (https://docs.stripe.com/api/pagination).
   */
  function listPage<Listed extends { id: string }>(newestFirst: Listed[], query: Record<string, unknown>, url: string): Answer {
    const limit = query.limit === undefined ? 10 : Number(query.limit)
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) return invalidRequest('limit', 'This value must be between 1 and 100.', 'parameter_invalid_integer')
    if (query.starting_after !== undefined && query.ending_before !== undefined) {
      return invalidRequest('starting_after', 'You may only specify one of these parameters: ending_before, starting_after.')
    }
    const cursor = query.starting_after ?? query.ending_before
    const index = cursor === undefined ? -1 : newestFirst.findIndex(listed => listed.id === cursor)
    if (cursor !== undefined && index < 0) return invalidRequest(query.starting_after === undefined ? 'ending_before' : 'starting_after', `No such object: '${String(cursor)}'`, 'resource_missing')
    if (query.ending_before !== undefined) {
      const before = newestFirst.slice(0, index)
      // The page just before the cursor: the `limit` objects nearest to it.
      return stripeJson(200, { object: 'list', data: before.slice(-limit), has_more: before.length > limit, url })
    }
    const after = query.starting_after === undefined ? newestFirst : newestFirst.slice(index + 1)
    return stripeJson(200, { object: 'list', data: after.slice(0, limit), has_more: after.length > limit, url })
  }

  /** amount_refunded: a failed or canceled refund gave its amount back; pending ones count. */
  function refundedTotal(intentId: string): number {
    return [...refunds.values()].filter(refund => refund.payment_intent === intentId && refund.status !== 'failed' && refund.status !== 'canceled')
      .reduce((total, refund) => total + refund.amount, 0)
  }

  function chargeView(charge: ChargeRecord): StandInCharge {
    const intent = intents.get(charge.payment_intent)!
    const refunded = refundedTotal(intent.id)
    const ofCharge = [...refunds.values()].filter(refund => refund.charge === charge.id).reverse()
    return {
      id: charge.id,
      object: 'charge',
      amount: intent.amount,
      amount_captured: intent.amount_received,
      amount_refunded: refunded,
      balance_transaction: null,
      captured: true,
      created: charge.created,
      currency: intent.currency,
      customer: intent.customer,
      description: intent.description,
      failure_code: null,
      failure_message: null,
      livemode: false,
      metadata: { ...intent.metadata },
      paid: true,
      payment_intent: intent.id,
      payment_method: charge.payment_method,
      receipt_email: intent.receipt_email,
      refunded: refunded > 0 && refunded >= intent.amount_received,
      refunds: { object: 'list', data: ofCharge.slice(0, CHARGE_REFUNDS_SHOWN), has_more: ofCharge.length > CHARGE_REFUNDS_SHOWN, url: `/v1/charges/${charge.id}/refunds` },
      status: 'succeeded',
    }
  }

  function succeedIntent(intent: StandInPaymentIntent, request: EventRequest = NO_REQUEST): StandInPaymentIntent {
    if (intent.status === 'canceled' || intent.status === 'succeeded') throw new StandInRefusal(`Stripe cannot charge PaymentIntent ${intent.id}: it is ${intent.status}`)
    const charge: ChargeRecord = { id: newId('ch', 24), payment_intent: intent.id, payment_method: intent.payment_method ?? newId('pm', 24), created: nowSeconds() }
    charges.set(charge.id, charge)
    Object.assign(intent, { status: 'succeeded', amount_received: intent.amount, latest_charge: charge.id, payment_method: charge.payment_method, last_payment_error: null })
    emit('payment_intent.succeeded', intent, request)
    return intent
  }

  function declineOf(intent: StandInPaymentIntent, message: string, request: EventRequest = NO_REQUEST) {
    if (intent.status === 'canceled' || intent.status === 'succeeded') throw new StandInRefusal(`Stripe cannot decline PaymentIntent ${intent.id}: it is ${intent.status}`)
    const error = { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message }
    Object.assign(intent, { status: 'requires_payment_method', last_payment_error: error, amount_received: 0 })
    emit('payment_intent.payment_failed', intent, request)
    return error
  }

  function eventOf(type: string, object: StripeEvent['data']['object'], request: EventRequest = NO_REQUEST): StripeEvent {
    return {
      id: newId('evt', 24),
      object: 'event',
      api_version: lastApiVersion ?? FALLBACK_API_VERSION,
      created: nowSeconds(),
      data: { object: structuredClone(object) },
      livemode: false,
      pending_webhooks: 1,
      request,
      type,
    }
  }

  function emit(type: string, object: StripeEvent['data']['object'], request: EventRequest) {
    const event = eventOf(type, object, request)
    events.push(event)
    if (held) held.push(event)
    else deliver(event)
  }

  /** Signs and sends one event to the webhook URL (nothing without one). */
  function deliver(event: StripeEvent) {
    if (!sender || !webhook) return
    const payload = JSON.stringify(event, null, 2)
    sender.send(payload, body => ({ 'content-type': 'application/json; charset=utf-8', 'user-agent': STRIPE_USER_AGENT, 'stripe-signature': stripeSignature(webhook.secret, body) }))
  }

  function releaseWebhooks({ order = 'as-made', duplicate = false }: ReleaseOptions = {}): number {
    const released = held ?? []
    held = undefined
    const sent = order === 'reversed' ? [...released].reverse() : released
    for (const event of sent) {
      deliver(event)
      if (duplicate) deliver(event)
    }
    return sender ? sent.length * (duplicate ? 2 : 1) : 0
  }

  function redeliver(eventId: string) {
    const event = events.find(made => made.id === eventId)
    if (!event) throw new StandInRefusal(`The Stripe stand-in made no event ${eventId}`, 404)
    if (!sender) throw new StandInRefusal('The Stripe stand-in was started without a webhook URL: there is nowhere to redeliver to')
    deliver(event)
  }

  const intentOf = (id: string) => {
    const intent = intents.get(id)
    if (!intent) throw new StandInRefusal(`The Stripe stand-in has no PaymentIntent ${id}`, 404)
    return intent
  }
  const refundOf = (id: string) => {
    const refund = refunds.get(id)
    if (!refund) throw new StandInRefusal(`The Stripe stand-in has no refund ${id}`, 404)
    return refund
  }

  function dashboardRefund(intentId: string, amount?: number, { pending = false }: { pending?: boolean } = {}): StandInRefund {
    const intent = intentOf(intentId)
    if (amount !== undefined && !(Number.isInteger(amount) && amount >= 1)) throw new StandInRefusal(`A refund amount is a positive integer, not ${amount}`)
    const refusal = refundRefusal(intent, amount)
    if (refusal) throw new StandInRefusal(refusal.message)
    const refund = makeRefund(intent, amount, { reason: null, metadata: {}, status: pending ? 'pending' : 'succeeded', request: NO_REQUEST })
    refundLog.push({ id: refund.id, dashboard: true })
    return refund
  }

  /**
   * refund.updated for every change of state, and refund.failed as well when it failed
   * (https://docs.stripe.com/api/events/types#event_types-refund.failed). A failed refund's money
   * is back on the charge: its amount_refunded falls by it.
   */
  function settleRefund(refundId: string, outcome: RefundOutcome): StandInRefund {
    const refund = refundOf(refundId)
    if (!(REFUND_OUTCOMES as readonly string[]).includes(outcome)) throw new StandInRefusal(`A refund settles as ${REFUND_OUTCOMES.join(', ')}, not ${String(outcome)}`)
    if (refund.status !== 'pending') throw new StandInRefusal(`Stripe settles only a pending refund; ${refundId} is ${refund.status}`)
    refund.status = outcome
    if (outcome === 'failed') refund.failure_reason = 'declined'
    emit('refund.updated', refund, NO_REQUEST)
    if (outcome === 'failed') emit('refund.failed', refund, NO_REQUEST)
    return refund
  }

  function controlRoute(method: string, path: string, parameters: Record<string, string>): Answer {
    const [, kind, id, action, extra] = path.slice(CONTROL_PREFIX.length).split('/').map(decodeURIComponent)
    if (method === 'GET' && kind === undefined) return controlAnswer(200, { payment_intents: [...intents.values()], refunds: [...refunds.values()] })
    if (method === 'GET' && kind === 'events' && id === undefined) return controlAnswer(200, events.filter(event => parameters.type === undefined || event.type === parameters.type))
    if (method === 'POST' && kind === 'events' && id && action === 'redeliver' && extra === undefined) {
      return control(() => {
        redeliver(id)
        return { redelivered: id }
      })
    }
    if (method === 'POST' && kind === 'webhooks' && id === 'hold' && action === undefined) {
      return control(() => {
        held ??= []
        return { holding: true }
      })
    }
    if (method === 'POST' && kind === 'webhooks' && id === 'release' && action === undefined) {
      return control(() => ({ sent: releaseWebhooks({ order: parameters.order === 'reversed' ? 'reversed' : 'as-made', duplicate: parameters.duplicate === 'true' || parameters.duplicate === '1' }) }))
    }
    if (method === 'POST' && kind === 'idempotency_keys' && id === 'forget' && action === undefined) {
      return control(() => {
        idempotency.clear()
        return { forgotten: true }
      })
    }
    if (method === 'POST' && extra === undefined && kind === 'payment_intents' && id) {
      if (action === 'succeed') return control(() => succeedIntent(intentOf(id)))
      if (action === 'fail') {
        return control(() => {
          declineOf(intentOf(id), parameters.message ?? 'Your card was declined.')
          return intentOf(id)
        })
      }
      if (action === 'refund') {
        const pending = parameters.pending === 'true' || parameters.pending === '1'
        return control(() => dashboardRefund(id, parameters.amount === undefined ? undefined : Number(parameters.amount), { pending }))
      }
    }
    if (method === 'POST' && kind === 'refunds' && id === 'pend' && action === undefined) {
      return control(() => {
        pendRefunds(parameters.count === undefined ? undefined : Number(parameters.count))
        return { pending: pendingRefundsLeft }
      })
    }
    const outcome = action === undefined ? undefined : OUTCOME_OF_CONTROL.get(action)
    if (method === 'POST' && extra === undefined && kind === 'refunds' && id && outcome) return control(() => settleRefund(id, outcome))
    return controlAnswer(404, { error: `No stand-in control ${method} ${path}`, controls: STRIPE_CONTROLS })
  }

  function pendRefunds(count = Number.POSITIVE_INFINITY) {
    if (!(count >= 0)) throw new StandInRefusal(`A count of refunds is a number ≥ 0, not ${count}`)
    pendingRefundsLeft = count
  }

  const served = await serve(handle, error => stripeError(500, { type: 'api_error', message: `Stand-in failure: ${String(error)}` }), port)
  return {
    url: `http://127.0.0.1:${served.port}`,
    port: served.port,
    calls,
    script,
    intents,
    refunds,
    succeed: id => succeedIntent(intentOf(id)),
    fail(id, message = 'Your card was declined.') {
      const intent = intentOf(id)
      declineOf(intent, message)
      return intent
    },
    cancel(id, reason) {
      const intent = intentOf(id)
      const refusal = cancelRefusal(intent)
      if (refusal) throw new StandInRefusal(refusal)
      return cancelIntent(intent, reason ?? null)
    },
    charge(id) {
      const chargeId = intentOf(id).latest_charge
      return chargeId ? chargeView(charges.get(chargeId)!) : undefined
    },
    dashboardRefund,
    pendRefunds,
    settleRefund,
    createdRefunds: () => refundLog.map(({ id, idempotencyKey, dashboard }) => ({ refund: refunds.get(id)!, ...(idempotencyKey !== undefined && { idempotencyKey }), dashboard })),
    idempotencyKeyUses(target) {
      const uses = new Map<string, number>()
      for (const call of calls) {
        if (call.method !== 'POST' || call.idempotencyKey === undefined || routeOf('POST', call.path)?.kind !== target) continue
        uses.set(call.idempotencyKey, (uses.get(call.idempotencyKey) ?? 0) + 1)
      }
      return uses
    },
    refundedTotal,
    forgetIdempotencyKeys: () => idempotency.clear(),
    events,
    event(objectId, type) {
      const charge = charges.get(objectId)
      const object = intents.get(objectId) ?? (charge && chargeView(charge)) ?? refunds.get(objectId)
      if (!object) throw new StandInRefusal(`The Stripe stand-in has no PaymentIntent, charge or refund ${objectId}`, 404)
      return eventOf(type, object)
    },
    get webhooks() {
      return sender?.deliveries ?? []
    },
    webhooksIdle: async () => sender?.idle(),
    holdWebhooks() {
      held ??= []
    },
    releaseWebhooks,
    redeliver,
    reset() {
      calls.length = 0
      script.length = 0
      events.length = 0
      held = undefined
      intents.clear()
      charges.clear()
      refunds.clear()
      refundLog.length = 0
      idempotency.clear()
      pendingRefundsLeft = 0
      sender?.close()
      sender = webhook && webhookSender(webhook.url)
    },
    async close() {
      sender?.close()
      await served.close()
    },
  }
}

/** The shopper's and dashboard's side, beside the API: what `npm run stand-in -- stripe` lists. */
export const STRIPE_CONTROLS = [
  'GET  /_stand-in                                   every PaymentIntent and refund',
  'POST /_stand-in/payment_intents/:id/succeed       the shopper pays',
  'POST /_stand-in/payment_intents/:id/fail          the card is declined (message=…)',
  'POST /_stand-in/payment_intents/:id/refund        a refund made in the dashboard (amount=…; default all that remains; pending=1 leaves it pending)',
  'POST /_stand-in/refunds/pend                      the next API refunds stay pending (count=…; default all)',
  'POST /_stand-in/refunds/:id/succeed | fail | cancel   a pending refund settles (a failed or canceled one gives its amount back)',
  'GET  /_stand-in/events                            every event made, oldest first (type=…)',
  'POST /_stand-in/events/:id/redeliver              send an event again, same id (needs --webhook-url)',
  'POST /_stand-in/webhooks/hold                     keep events back instead of sending them',
  'POST /_stand-in/webhooks/release                  send the held events (order=reversed; duplicate=1 sends each twice)',
  'POST /_stand-in/idempotency_keys/forget           forget every Idempotency-Key, as Stripe does after 24 hours',
]

/** How many refunds a charge object lists itself; the rest are paged from /v1/refunds. */
const CHARGE_REFUNDS_SHOWN = 10
const REFUND_OUTCOMES = ['succeeded', 'failed', 'canceled'] as const satisfies readonly RefundOutcome[]
const OUTCOME_OF_CONTROL = new Map<string, RefundOutcome>([['succeed', 'succeeded'], ['fail', 'failed'], ['cancel', 'canceled']])

const NO_REQUEST: EventRequest = { id: null, idempotency_key: null }

/** No event: a cancel is the app's own request, and payment_intent.canceled is not one its endpoint subscribes to. */
function cancelIntent(intent: StandInPaymentIntent, reason: string | null): StandInPaymentIntent {
  return Object.assign(intent, { status: 'canceled', canceled_at: nowSeconds(), cancellation_reason: reason, amount_capturable: 0 })
}

function cancelRefusal(intent: StandInPaymentIntent): string | undefined {
  if (CANCELABLE.includes(intent.status)) return undefined
  return `You cannot cancel this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be canceled: ${CANCELABLE.join(', ')}.`
}

function routeOf(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/v1/payment_intents') return { kind: 'create' }
  if (method === 'POST' && path === '/v1/refunds') return { kind: 'refund' }
  if (method === 'GET' && path === '/v1/refunds') return { kind: 'refund-list' }
  if (method === 'GET' && path === '/v1/payment_intents/search') return { kind: 'search' }
  if (method === 'GET' && path === '/v1/payment_intents') return { kind: 'list' }
  const canceled = method === 'POST' ? /^\/v1\/payment_intents\/([^/]+)\/cancel$/.exec(path)?.[1] : undefined
  if (canceled) return { kind: 'cancel', id: decodeURIComponent(canceled) }
  const retrieved = method === 'GET' ? /^\/v1\/payment_intents\/([^/]+)$/.exec(path)?.[1] : undefined
  if (retrieved) return { kind: 'retrieve', id: decodeURIComponent(retrieved) }
  const refund = method === 'GET' ? /^\/v1\/refunds\/([^/]+)$/.exec(path)?.[1] : undefined
  if (refund) return { kind: 'refund-retrieve', id: decodeURIComponent(refund) }
  return undefined
}

/** Whether a scripted fault is for this request's Idempotency-Key (any, when it names none). */
function forKey(entry: StripeScriptedFault, idempotencyKey: string | undefined): boolean {
  const wanted = entry.idempotencyKey
  if (wanted === undefined) return true
  return idempotencyKey !== undefined && (typeof wanted === 'string' ? wanted === idempotencyKey : wanted.test(idempotencyKey))
}

function faultTargetOf(method: string, route: Route | undefined): FaultTarget | undefined {
  if (method === 'GET') return 'read'
  return route?.kind === 'create' || route?.kind === 'refund' || route?.kind === 'cancel' ? route.kind : undefined
}

function authenticate(authorization: string | undefined, secretKey: string): Answer | undefined {
  const [scheme = '', credentials = ''] = (authorization ?? '').trim().split(/\s+/, 2)
  const key = /^bearer$/i.test(scheme)
    ? credentials
    : /^basic$/i.test(scheme)
      ? Buffer.from(credentials, 'base64').toString('utf8').split(':')[0]
      : ''
  if (key === secretKey) return undefined
  if (!key) {
    return stripeError(401, {
      type: 'invalid_request_error',
      message: 'You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. \'Authorization: Bearer YOUR_SECRET_KEY\'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/.',
    })
  }
  const redacted = key.length > 12 ? `${key.slice(0, 8)}${'*'.repeat(key.length - 12)}${key.slice(-4)}` : '*'.repeat(key.length)
  return stripeError(401, { type: 'invalid_request_error', message: `Invalid API Key provided: ${redacted}` })
}

function scriptedStatus(fault: Extract<ProviderFault, { kind: 'status' }>): Answer {
  const error = fault.error ?? (
    fault.status === 429
      ? { type: 'rate_limit_error', code: 'rate_limit', message: 'Request rate limit exceeded. You can learn more about rate limits here https://stripe.com/docs/rate-limits.' }
      : fault.status === 409
        ? { type: 'idempotency_error', code: 'idempotency_key_in_use', message: 'There is currently another in-progress request using this Idempotent Key. Please try again later.' }
        : fault.status >= 500
          ? { type: 'api_error', message: 'Sorry, something went wrong. We\'ve already been notified of the problem.' }
          : { type: 'invalid_request_error', message: `Scripted HTTP ${fault.status}.` })
  const answer = stripeError(fault.status, error)
  if (fault.retryAfter !== undefined) answer.headers['retry-after'] = fault.retryAfter
  Object.assign(answer.headers, fault.headers)
  return answer
}

function invalidRequest(param: string, message: string, code?: string): Answer {
  return stripeError(400, { type: 'invalid_request_error', ...(code && { code }), param, message })
}

function stripeError(status: number, error: Record<string, unknown>): Answer {
  return stripeJson(status, { error })
}

/** Stripe answers pretty-printed JSON; a replay repeats these bytes. */
function stripeJson(status: number, value: unknown): Answer {
  return jsonAnswer(status, `${JSON.stringify(value, null, 2)}\n`)
}

/** An amount in the currency's smallest unit as Stripe's messages write it: 1500 usd → $15.00. */
function money(amount: number, currency: string): string {
  const format = new Intl.NumberFormat('en-US', { style: 'currency', currency })
  return format.format(amount / 10 ** (format.resolvedOptions().maximumFractionDigits ?? 2))
}

/** Form fields with bracket names into nested objects; objects keyed 0, 1, … (or `[]`) into arrays. */
function parseForm(raw: string): Record<string, unknown> {
  const root: Record<string, unknown> = {}
  for (const [name, value] of new URLSearchParams(raw)) {
    const [head = '', ...rest] = name.split('[')
    const segments = [head, ...rest.map(segment => segment.replace(/\]$/, ''))]
    if (segments.some(segment => segment === '__proto__' || segment === 'constructor' || segment === 'prototype')) continue
    const last = segments.pop() ?? ''
    let node = root
    for (const segment of segments) {
      const inner = node[segment]
      node = typeof inner === 'object' && inner !== null ? inner as Record<string, unknown> : (node[segment] = {})
    }
    node[last === '' && segments.length > 0 ? String(Object.keys(node).length) : last] = value
  }
  return arraysOf(root) as Record<string, unknown>
}

function arraysOf(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  const entries = Object.entries(value).map(([key, inner]) => [key, arraysOf(inner)] as const)
  if (entries.length > 0 && entries.every(([key]) => /^\d+$/.test(key))) {
    return entries.sort(([a], [b]) => Number(a) - Number(b)).map(([, inner]) => inner)
  }
  return Object.fromEntries(entries)
}

function stringValues(object: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== '').map(([key, value]) => [key, String(value)]))
}

const nowSeconds = () => Math.floor(Date.now() / 1000)

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function randomAlphanumeric(length: number): string {
  return [...randomBytes(length)].map(byte => ALPHANUMERIC[byte % ALPHANUMERIC.length]).join('')
}

/** Stripe-style ids: `pi_3Q…`, `ch_…`, `re_…`, `evt_…`. */
function newId(prefix: string, length: number): string {
  return `${prefix}_${randomAlphanumeric(length)}`
}
