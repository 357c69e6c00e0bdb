import http from 'node:http'
import type net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * What the Stripe and Midtrans stand-ins share: the record of each request, the fault script, the
 * HTTP server and the webhook sender.
 */

/** One HTTP request as a stand-in received it. */
export interface ProviderCall {
  method: string
  /** Without the query string (see `query`). */
  path: string
  query: Record<string, string>
  idempotencyKey?: string
  /** Stripe's form body parsed into objects and arrays (`metadata[order_id]=…` → `{ metadata: { order_id } }`, values stay strings); Midtrans' JSON. */
  body: Record<string, unknown>
  authorization?: string
  headers: http.IncomingHttpHeaders
  /** Date.now() on arrival. */
  at: number
  /**
   * The status answered, or 'dropped' when the connection closed instead (a fault destroyed it, or
   * the caller left while its answer was held); unset while still being handled.
   */
  answered?: number | 'dropped'
}

export type ProviderFault
  /**
   * Answer this status with the provider's error body (and Retry-After when given); nothing is
   * created or stored. `error` replaces the body's error: Stripe's `error` object, Midtrans' fields.
   * `headers` are added to the answer (e.g. Stripe-Should-Retry, which stripe-node obeys).
   */
  = | { kind: 'status', status: number, retryAfter?: string, error?: Record<string, unknown>, headers?: Record<string, string> }
  /** Do the work (create, refund, cancel, store the idempotent answer), then destroy the socket: a lost response. */
    | { kind: 'drop-after' }
  /** Destroy the socket before doing anything. */
    | { kind: 'drop-before' }
  /** Wait, then handle normally; a POST holds its Idempotency-Key as in progress meanwhile. */
    | { kind: 'delay', ms: number }
  /**
   * Do the work (create, refund, cancel, store the idempotent answer), then hold the answer for `ms`
   * (less when the caller goes away): the caller can die after the provider acted, before it heard.
   */
    | { kind: 'hold-answer', ms: number }

/** Which requests a fault is for: create (a payment), read (any GET), refund, cancel. */
export type FaultTarget = 'create' | 'read' | 'refund' | 'cancel'

export interface ScriptedFault<Fault = ProviderFault> {
  /** `any`: every request, whatever it asks. */
  match: FaultTarget | 'any'
  fault: Fault
  /** Met by every request it fits, and never taken out of the script (an outage, until a test removes it). */
  sticky?: boolean
}

/** Takes the first fault of the script that fits the request (its target, and `fits` when given) out of it (FIFO); a sticky one stays. */
export function takeFault<Entry extends ScriptedFault<unknown>>(script: Entry[], target: FaultTarget | undefined, fits: (entry: Entry) => boolean = () => true): Entry['fault'] | undefined {
  const index = script.findIndex(entry => (entry.match === 'any' || entry.match === target) && fits(entry))
  if (index < 0) return undefined
  return script[index]!.sticky ? script[index]!.fault : script.splice(index, 1)[0]?.fault
}

export interface Answer { status: number, headers: Record<string, string>, body: string }

export function jsonAnswer(status: number, body: string): Answer {
  return { status, headers: { 'content-type': 'application/json' }, body }
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

export function writeAnswer(res: http.ServerResponse, answer: Answer) {
  res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) })
  res.end(answer.body)
}

/**
 * Holds an answer `ms`, or until the caller closes the connection (it died or gave up); false, with
 * the call marked dropped, when the caller is gone.
 */
export async function holdAnswer(req: http.IncomingMessage, call: ProviderCall, ms: number): Promise<boolean> {
  const gone = new AbortController()
  const abort = () => gone.abort()
  req.socket.once('close', abort)
  await sleep(ms, undefined, { signal: gone.signal }).catch(() => {})
  req.socket.off('close', abort)
  if (!req.socket.destroyed) return true
  call.answered = 'dropped'
  return false
}

/** Destroys the connection instead of answering: the client sees it closed. */
export function drop(req: http.IncomingMessage, call: ProviderCall) {
  call.answered = 'dropped'
  req.socket.destroy()
}

export interface Served {
  port: number
  /** Stops listening and destroys open connections (a keep-alive client would hold the server open). */
  close(): Promise<void>
}

/**
 * Serves `handle` on 127.0.0.1:`port`; port 0 lets the system pick one (no window for another
 * process to take it). A handler that throws is answered with `failure(error)`.
 */
export async function serve(handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>, failure: (error: unknown) => Answer, port = 0): Promise<Served> {
  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !req.socket.destroyed) writeAnswer(res, failure(error))
    })
  })
  const sockets = new Set<net.Socket>()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  const listening = await new Promise<number>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port))
  })
  return {
    port: listening,
    async close() {
      const closed = new Promise<void>(resolve => server.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}

/** One webhook the stand-in sent, with every attempt. */
export interface WebhookDelivery {
  url: string
  /** The JSON body sent. */
  body: string
  /** Each attempt's HTTP status, or the network error's code or message. */
  attempts: Array<number | string>
  /** A 2xx answered. */
  delivered: boolean
}

export interface WebhookSender {
  deliveries: WebhookDelivery[]
  /** Posts `body` with `headers(body)`, computed again for each attempt (a signature's timestamp stays fresh). */
  send(body: string, headers: (body: string) => Record<string, string>): void
  /** Resolves once every delivery has been answered with 2xx or has run out of attempts. */
  idle(): Promise<void>
  /** Stops retrying. */
  close(): void
}

/** The waits before each retry of a delivery not answered 2xx: a receiver restarting in the meantime still gets it. */
export const WEBHOOK_RETRY_DELAYS_MS = [1_000, 5_000, 30_000]
const WEBHOOK_TIMEOUT_MS = 10_000

export function webhookSender(url: string, retryDelaysMs = WEBHOOK_RETRY_DELAYS_MS): WebhookSender {
  const deliveries: WebhookDelivery[] = []
  const inFlight = new Set<Promise<void>>()
  const stop = new AbortController()
  // First attempts go out one after another, in the order of the changes; retries come later, as at the providers.
  let queue = Promise.resolve()

  /** One POST; true when answered 2xx. Never throws. */
  async function attempt(delivery: WebhookDelivery, headers: (body: string) => Record<string, string>): Promise<boolean> {
    try {
      const response = await fetch(url, { method: 'POST', headers: headers(delivery.body), body: delivery.body, signal: AbortSignal.any([stop.signal, AbortSignal.timeout(WEBHOOK_TIMEOUT_MS)]) })
      await response.arrayBuffer()
      delivery.attempts.push(response.status)
      delivery.delivered = response.ok
    }
    catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause
      delivery.attempts.push(cause?.code ?? (error instanceof Error ? error.message : String(error)))
    }
    return delivery.delivered
  }

  async function retry(delivery: WebhookDelivery, headers: (body: string) => Record<string, string>) {
    for (const wait of retryDelaysMs) {
      // Unref'd: pending retries never keep a test process alive.
      await sleep(wait, undefined, { signal: stop.signal, ref: false }).catch(() => {})
      if (stop.signal.aborted || await attempt(delivery, headers)) return
    }
  }

  return {
    deliveries,
    send(body, headers) {
      const delivery: WebhookDelivery = { url, body, attempts: [], delivered: false }
      deliveries.push(delivery)
      const first = queue.then(() => attempt(delivery, headers))
      queue = first.then(() => {})
      const running = first.then(delivered => delivered ? undefined : retry(delivery, headers)).finally(() => inFlight.delete(running))
      inFlight.add(running)
    },
    async idle() {
      while (inFlight.size > 0) await Promise.all(inFlight)
    },
    close: () => stop.abort(),
  }
}

/** Key order does not make two requests' parameters different. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    return `{${Object.keys(value).sort().map(key => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** A control request's parameters: the query string, then a JSON or form body on top. */
export function controlParameters(url: URL, raw: string): Record<string, string> {
  const parameters: Record<string, string> = Object.fromEntries(url.searchParams)
  if (raw.trim() === '') return parameters
  try {
    const parsed: unknown = JSON.parse(raw)
    if (typeof parsed === 'object' && parsed !== null) {
      for (const [key, value] of Object.entries(parsed)) parameters[key] = String(value)
    }
  }
  catch {
    Object.assign(parameters, Object.fromEntries(new URLSearchParams(raw)))
  }
  return parameters
}

/** Where the control surface (the shopper's and dashboard's side) is served, beside the provider's API. */
export const CONTROL_PREFIX = '/_stand-in'

/**
 * A move the provider would not make (refunding an unpaid payment), or about something it does not
 * have: thrown by the test helpers, answered 409 or 404 by the control surface.
 */
export class StandInRefusal extends Error {
  constructor(message: string, readonly status: 404 | 409 = 409) {
    super(message)
    this.name = 'StandInRefusal'
  }
}

export function controlAnswer(status: number, value: unknown): Answer {
  return jsonAnswer(status, `${JSON.stringify(value, null, 2)}\n`)
}

/** Runs a control action: its result answered 200, a refusal 404/409 with its message. */
export function control(action: () => unknown): Answer {
  try {
    return controlAnswer(200, action())
  }
  catch (error) {
    if (error instanceof StandInRefusal) return controlAnswer(error.status, { error: error.message })
    throw error
  }
}
