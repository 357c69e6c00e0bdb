import { createHmac, randomBytes } from 'node:crypto'
import http from 'node:http'
import type net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * A local stand-in for the part of Stripe's HTTP API the app uses (PaymentIntents: create,
 * retrieve, search), answering what the official client sends with the shapes Stripe documents,
 * including its idempotency rules. Tests script faults per request (a status, a lost response, a
 * dropped connection, a slow answer) and move intents as a shopper's payment would.
 */

/** One HTTP request as the stand-in received it. */
export interface ProviderCall {
  method: string
  /** Without the query string (see `query`). */
  path: string
  query: Record<string, string>
  idempotencyKey?: string
  /** The form body parsed into objects and arrays (`metadata[order_id]=…` → `{ metadata: { order_id } }`); values stay strings. */
  body: Record<string, unknown>
  authorization?: string
  headers: http.IncomingHttpHeaders
  /** Date.now() on arrival. */
  at: number
  /** The status answered, or 'dropped' when a fault destroyed the connection instead; unset while still being handled. */
  answered?: number | 'dropped'
}

export type ProviderFault
  /**
   * Answer this status with the provider's error body (and Retry-After when given); nothing is
   * created or stored. `error` replaces the body's error: Stripe's `error` object, Midtrans' fields.
   */
  = | { kind: 'status', status: number, retryAfter?: string, error?: Record<string, unknown> }
  /** Do the work (create, store the idempotent answer), then destroy the socket: a lost response. */
    | { kind: 'drop-after' }
  /** Destroy the socket before doing anything. */
    | { kind: 'drop-before' }
  /** Wait, then handle normally; a create holds its Idempotency-Key as in progress meanwhile. */
    | { kind: 'delay', ms: number }

export interface ScriptedFault<Fault = ProviderFault> {
  /** create: POST /v1/payment_intents; read: any GET; any: every request. */
  match: 'create' | 'read' | 'any'
  fault: Fault
}

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

export interface StripeEvent {
  id: string
  object: 'event'
  api_version: string
  created: number
  data: { object: StandInPaymentIntent }
  livemode: false
  pending_webhooks: number
  request: { id: null, idempotency_key: null }
  type: string
}

export interface StripeApi {
  /** http://127.0.0.1:PORT */
  url: string
  port: number
  calls: ProviderCall[]
  /** Faults applied FIFO: each request takes the first one whose `match` fits it. */
  script: ScriptedFault[]
  /** Every intent created, by id, in creation order. */
  intents: Map<string, StandInPaymentIntent>
  /** The shopper paid: succeeded, amount_received = amount, a latest_charge. */
  succeed(intentId: string): StandInPaymentIntent
  /** The shopper's payment was declined: back to requires_payment_method with a card_error. */
  fail(intentId: string, message?: string): StandInPaymentIntent
  cancel(intentId: string): StandInPaymentIntent
  /** A Stripe Event about the intent as it is now (a copy), for a test to sign and post as a webhook. */
  event(intentId: string, type: string): StripeEvent
  /** Forgets intents, idempotency keys, calls and the script. */
  reset(): void
  close(): Promise<void>
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
/** The test PaymentMethod Stripe declines on confirmation. */
const DECLINED_TEST_PAYMENT_METHOD = 'pm_card_chargeDeclined'

interface Answer { status: number, headers: Record<string, string>, body: string }

interface IdempotencyEntry {
  /** Method, path and parameters of the first request: a different one under the key is refused. */
  fingerprint: string
  /** Unset while the first request is still being handled (a second one then gets 409). */
  answer?: Answer
  requestId?: string
}

type Route = { kind: 'create' } | { kind: 'retrieve', id: string } | { kind: 'search' }

export async function startStripeApi({ secretKey }: { secretKey: string }): Promise<StripeApi> {
  const calls: ProviderCall[] = []
  const script: ScriptedFault[] = []
  const intents = new Map<string, StandInPaymentIntent>()
  const idempotency = new Map<string, IdempotencyEntry>()
  let lastApiVersion: string | undefined

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !req.socket.destroyed) {
        writeAnswer(res, stripeError(500, { type: 'api_error', message: `Stand-in failure: ${String(error)}` }), newId('req', 14))
      }
    })
  })
  const sockets = new Set<net.Socket>()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const raw = await readBody(req)
    const url = new URL(req.url ?? '/', 'http://stand-in')
    const method = req.method ?? 'GET'
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
    const fault = takeFault(script, route?.kind === 'create' ? 'create' : method === 'GET' ? 'read' : undefined)
    const requestId = newId('req', 14)
    const send = (answer: Answer, replayOf?: IdempotencyEntry) => {
      const headers: Record<string, string> = { ...answer.headers }
      if (call.headers['stripe-version']) headers['stripe-version'] = String(call.headers['stripe-version'])
      if (method === 'POST' && idempotencyKey) headers['idempotency-key'] = idempotencyKey
      if (replayOf) {
        headers['idempotent-replayed'] = 'true'
        if (replayOf.requestId) headers['original-request'] = replayOf.requestId
      }
      if (fault?.kind === 'drop-after') return drop(req, call)
      call.answered = answer.status
      writeAnswer(res, { ...answer, headers }, requestId)
    }

    if (fault?.kind === 'drop-before') return drop(req, call)
    if (fault?.kind === 'status') return send(scriptedStatus(fault))

    const authFailure = authenticate(header(req, 'authorization'), secretKey)
    if (authFailure) return send(authFailure)
    if (!route) {
      return send(stripeError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${url.pathname}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.` }))
    }

    if (route.kind !== 'create') {
      if (fault?.kind === 'delay') await sleep(fault.ms)
      return send(route.kind === 'retrieve' ? retrieve(route.id) : search(call.query))
    }

    if (idempotencyKey === undefined) {
      if (fault?.kind === 'delay') await sleep(fault.ms)
      return send(create(call.body))
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
      answer = create(call.body)
    }
    catch (error) {
      idempotency.delete(scopedKey)
      throw error
    }
    // Stripe keeps successes and the refusals it decided on; rate limits, conflicts and server errors
    // are not kept, so a retry under the same key runs again.
    if (answer.status < 500 && answer.status !== 429 && answer.status !== 409) Object.assign(entry, { answer, requestId })
    else idempotency.delete(scopedKey)
    return send(answer)
  }

  function create(body: Record<string, unknown>): Answer {
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
      const declined = declineOf(intent, 'Your card was declined.')
      return stripeError(402, { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: declined.message, payment_intent: structuredClone(intent) })
    }
    if (confirm) succeedIntent(intent)
    return stripeJson(200, intent)
  }

  function retrieve(id: string): Answer {
    const intent = intents.get(id)
    if (!intent) return stripeError(404, { type: 'invalid_request_error', code: 'resource_missing', param: 'intent', message: `No such payment_intent: '${id}'` })
    return stripeJson(200, intent)
  }

  /** Stripe's search query language, only the form `metadata['key']:'value'` (either quote). */
  function search(query: Record<string, string>): Answer {
    if (!query.query) return invalidRequest('query', 'Missing required param: query.', 'parameter_missing')
    const equality = /^\s*metadata\[(['"])(.+?)\1\]\s*:\s*(['"])(.*)\3\s*$/.exec(query.query)
    if (!equality) return invalidRequest('query', `The stand-in understands only metadata['key']:'value' queries, not: ${query.query}`)
    const [, , key = '', , value] = equality
    const data = [...intents.values()].filter(intent => intent.metadata[key] === value).reverse()
    return stripeJson(200, { object: 'search_result', data, has_more: false, next_page: null, url: '/v1/payment_intents/search' })
  }

  const intentOf = (id: string) => {
    const intent = intents.get(id)
    if (!intent) throw new Error(`The Stripe stand-in has no PaymentIntent ${id}`)
    return intent
  }

  const port = await listen(server)
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    script,
    intents,
    succeed: id => succeedIntent(intentOf(id)),
    fail(id, message = 'Your card was declined.') {
      const intent = intentOf(id)
      declineOf(intent, message)
      return intent
    },
    cancel(id) {
      const intent = intentOf(id)
      Object.assign(intent, { status: 'canceled', canceled_at: nowSeconds() })
      return intent
    },
    event(id, type) {
      return {
        id: newId('evt', 24),
        object: 'event',
        api_version: lastApiVersion ?? FALLBACK_API_VERSION,
        created: nowSeconds(),
        data: { object: structuredClone(intentOf(id)) },
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type,
      }
    },
    reset() {
      calls.length = 0
      script.length = 0
      intents.clear()
      idempotency.clear()
    },
    async close() {
      const closed = new Promise<void>(resolve => server.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}

function succeedIntent(intent: StandInPaymentIntent): StandInPaymentIntent {
  return Object.assign(intent, {
    status: 'succeeded',
    amount_received: intent.amount,
    latest_charge: newId('ch', 24),
    payment_method: intent.payment_method ?? newId('pm', 24),
    last_payment_error: null,
  })
}

function declineOf(intent: StandInPaymentIntent, message: string) {
  const error = { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message }
  Object.assign(intent, { status: 'requires_payment_method', last_payment_error: error, amount_received: 0 })
  return error
}

function routeOf(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/v1/payment_intents') return { kind: 'create' }
  if (method === 'GET' && path === '/v1/payment_intents/search') return { kind: 'search' }
  const retrieved = method === 'GET' ? /^\/v1\/payment_intents\/([^/]+)$/.exec(path)?.[1] : undefined
  if (retrieved) return { kind: 'retrieve', id: decodeURIComponent(retrieved) }
  return undefined
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
  return { status, headers: { 'content-type': 'application/json' }, body: `${JSON.stringify(value, null, 2)}\n` }
}

function writeAnswer(res: http.ServerResponse, answer: Answer, requestId: string) {
  res.writeHead(answer.status, { ...answer.headers, 'request-id': requestId, 'content-length': Buffer.byteLength(answer.body) })
  res.end(answer.body)
}

function drop(req: http.IncomingMessage, call: ProviderCall) {
  call.answered = 'dropped'
  req.socket.destroy()
}

export function takeFault<Fault>(script: ScriptedFault<Fault>[], kind: 'create' | 'read' | undefined): Fault | undefined {
  const index = script.findIndex(entry => entry.match === 'any' || entry.match === kind)
  return index < 0 ? undefined : script.splice(index, 1)[0]?.fault
}

/** Form fields with bracket names into nested objects; objects keyed 0, 1, … into arrays. */
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
    node[last] = value
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

/** Key order does not make two requests' parameters different. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    return `{${Object.keys(value).sort().map(key => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

function stringValues(object: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== '').map(([key, value]) => [key, String(value)]))
}

export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.once('error', reject)
  })
}

export function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** Listens on a port the system picks (no window for another process to take it) and returns it. */
export function listen(server: http.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port))
  })
}

const nowSeconds = () => Math.floor(Date.now() / 1000)

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function randomAlphanumeric(length: number): string {
  return [...randomBytes(length)].map(byte => ALPHANUMERIC[byte % ALPHANUMERIC.length]).join('')
}

/** Stripe-style ids: `pi_3Q…`, `ch_…`, `evt_…`. */
function newId(prefix: string, length: number): string {
  return `${prefix}_${randomAlphanumeric(length)}`
}
