import http from 'node:http'
import type net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * An HTTP proxy between two parties of a test — the app and a provider stand-in (the app's
 * STRIPE_API_BASE or MIDTRANS_API_BASE points at it), or a stand-in and the app (the stand-in's
 * webhook URL points at it) — that does to each request what the test scripted for it: answer a
 * status without forwarding, forward it late (after the caller gave up, so the far side still acts),
 * forward it and hold or drop the answer (the far side acted, the caller never heard), forward it
 * twice or more, or take it off the caller's hands and deliver it later, in any order. Unscripted
 * requests pass through. Every request is recorded with what was done and what each side saw.
 */

/** One request as the proxy received it (the body read whole). */
export interface ProxiedRequest {
  method: string
  /** With the query string. */
  path: string
  headers: http.IncomingHttpHeaders
  body: string
}

export type ProxyAction
  /** Answer `status` with `body` (JSON) and `headers`; nothing is forwarded. */
  = | { kind: 'status', status: number, body?: unknown, headers?: Record<string, string> }
  /**
   * Forward after `ms`, whether or not the caller is still waiting: with `ms` past the caller's
   * timeout, the caller sees a timeout and the far side acts anyway, later.
   */
    | { kind: 'delay', ms: number }
  /** Forward now; hold the far side's answer `ms` before passing it on (the caller times out after the far side acted). */
    | { kind: 'hold-answer', ms: number }
  /** Forward now; when the far side has answered, close the caller's connection instead of answering (a lost answer). */
    | { kind: 'drop-answer' }
  /** Forward, answer the caller with the first answer, and forward `copies` more copies, `gapMs` apart (a duplicated delivery). */
    | { kind: 'duplicate', copies: number, gapMs?: number }
  /**
   * Answer the caller `200 {}` at once and keep the request until `release()` forwards it (a delivery
   * delayed, to be reordered among others). The caller's queue moves on meanwhile.
   */
    | { kind: 'queue' }

export interface ProxyRule {
  /** Which requests the rule is for. */
  match: (request: ProxiedRequest) => boolean
  action: ProxyAction
  /** How many requests it applies to (1 unless given; Infinity keeps it until removed). */
  times?: number
  /** Names the rule in the record. */
  label?: string
}

/** What happened to one request. */
export interface ProxyExchange {
  request: ProxiedRequest
  /** The rule's action kind, or 'pass'. */
  action: ProxyAction['kind'] | 'pass'
  label?: string
  /** The far side's status for each forwarded copy, or the network error's code; empty when nothing was forwarded. */
  forwarded: Array<number | string>
  /** What the caller got: a status, 'dropped' (its connection closed), 'gone' (it left before the answer) or unset while pending. */
  answered?: number | 'dropped' | 'gone'
}

export interface FaultProxy {
  /** http://127.0.0.1:PORT: give it to the caller instead of the target. */
  url: string
  port: number
  /** Rules, first match wins; a rule used `times` times is taken out. */
  script: ProxyRule[]
  exchanges: ProxyExchange[]
  /** Requests queued by a `queue` rule, not yet released. */
  queued(): ProxiedRequest[]
  /**
   * Forwards the queued requests that `which` selects (all by default) in the order `order` gives
   * them (arrival order by default), one after another; a copy answered other than 2xx is sent again
   * up to `retries` times (3), `retryGapMs` apart (100), as a sender retries.
   */
  release(options?: { which?: (request: ProxiedRequest) => boolean, order?: (queued: ProxiedRequest[]) => ProxiedRequest[], retries?: number, retryGapMs?: number }): Promise<void>
  /** Resolves once nothing the proxy forwards on its own (delays, duplicates, releases) is still under way. */
  idle(): Promise<void>
  /** How many of those are under way now. */
  inFlight(): number
  close(): Promise<void>
}

/** Headers that describe one hop's connection, not the message. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'host', 'content-length'])

interface FarAnswer { status: number, headers: Record<string, string>, body: Buffer }

/** `target`: the far side's base URL, or a function naming it per request (e.g. taking app instances in turn). */
export async function startFaultProxy(options: { target: string | (() => string), port?: number }): Promise<FaultProxy> {
  const targetOf = typeof options.target === 'string' ? () => options.target as string : options.target
  const script: ProxyRule[] = []
  const exchanges: ProxyExchange[] = []
  const queue: Array<{ request: ProxiedRequest, exchange: ProxyExchange }> = []
  const background = new Set<Promise<unknown>>()
  const sockets = new Set<net.Socket>()
  let closing = false

  /** Runs `work` detached from the caller, counted by idle(). */
  const detach = (work: Promise<unknown>) => {
    const running = work.catch(() => {}).finally(() => background.delete(running))
    background.add(running)
  }

  /** The request to the far side: never tied to the caller's connection, so it completes when the caller leaves. */
  function forward(request: ProxiedRequest): Promise<FarAnswer> {
    const target = new URL(targetOf())
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | string[]> = {}
      for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_HEADERS.has(name)) headers[name] = value
      headers['content-length'] = String(Buffer.byteLength(request.body))
      const outgoing = http.request({ host: target.hostname, port: target.port, method: request.method, path: request.path, headers, agent: false }, (incoming) => {
        const chunks: Buffer[] = []
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
        incoming.once('error', reject)
        incoming.once('end', () => {
          const answerHeaders: Record<string, string> = {}
          for (const [name, value] of Object.entries(incoming.headers)) if (value !== undefined && !HOP_HEADERS.has(name)) answerHeaders[name] = String(value)
          resolve({ status: incoming.statusCode ?? 502, headers: answerHeaders, body: Buffer.concat(chunks) })
        })
      })
      outgoing.once('error', reject)
      outgoing.end(request.body)
    })
  }

  /** Forwards and records the far side's status (or error code); rethrows a network error. */
  async function forwardRecorded(request: ProxiedRequest, exchange: ProxyExchange): Promise<FarAnswer> {
    try {
      const answer = await forward(request)
      exchange.forwarded.push(answer.status)
      return answer
    }
    catch (error) {
      exchange.forwarded.push((error as NodeJS.ErrnoException).code ?? String(error))
      throw error
    }
  }

  function reply(res: http.ServerResponse, exchange: ProxyExchange, answer: FarAnswer) {
    if (res.destroyed || res.socket?.destroyed) {
      exchange.answered = 'gone'
      return
    }
    exchange.answered = answer.status
    res.writeHead(answer.status, { ...answer.headers, 'content-length': answer.body.length })
    res.end(answer.body)
  }

  const json = (status: number, body: unknown, headers: Record<string, string> = {}): FarAnswer =>
    ({ status, headers: { 'content-type': 'application/json', ...headers }, body: Buffer.from(JSON.stringify(body ?? {})) })

  function takeRule(request: ProxiedRequest): ProxyRule | undefined {
    const index = script.findIndex(rule => rule.match(request))
    if (index < 0) return undefined
    const rule = script[index]!
    const left = (rule.times ?? 1) - 1
    if (left <= 0) script.splice(index, 1)
    else rule.times = left
    return rule
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const request: ProxiedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }
    const rule = takeRule(request)
    const exchange: ProxyExchange = { request, action: rule?.action.kind ?? 'pass', ...(rule?.label && { label: rule.label }), forwarded: [] }
    exchanges.push(exchange)
    const action = rule?.action
    const failed = () => {
      exchange.answered = 'dropped'
      res.socket?.destroy()
    }

    switch (action?.kind) {
      case undefined:
        return forwardRecorded(request, exchange).then(answer => reply(res, exchange, answer), failed)
      case 'status':
        return reply(res, exchange, json(action.status, action.body, action.headers))
      case 'delay': {
        // Detached: the far side gets it even after the caller has gone.
        const late = sleep(action.ms).then(() => forwardRecorded(request, exchange))
        detach(late)
        return late.then(answer => reply(res, exchange, answer), failed)
      }
      case 'hold-answer': {
        const answer = await forwardRecorded(request, exchange).catch(() => undefined)
        if (!answer) return failed()
        await holdWhileConnected(req, action.ms)
        return reply(res, exchange, answer)
      }
      case 'drop-answer':
        await forwardRecorded(request, exchange).catch(() => undefined)
        return failed()
      case 'duplicate': {
        const first = await forwardRecorded(request, exchange).catch(() => undefined)
        detach((async () => {
          for (let copy = 0; copy < action.copies; copy++) {
            await sleep(action.gapMs ?? 0)
            await forwardRecorded(request, exchange).catch(() => undefined)
          }
        })())
        return first ? reply(res, exchange, first) : failed()
      }
      case 'queue':
        queue.push({ request, exchange })
        return reply(res, exchange, json(200, {}))
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.socket?.destroy())
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port))
  })

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    script,
    exchanges,
    queued: () => queue.map(entry => entry.request),
    async release({ which = () => true, order = (queued: ProxiedRequest[]) => queued, retries = 3, retryGapMs = 100 } = {}) {
      const taken = queue.filter(entry => which(entry.request))
      for (const entry of taken) queue.splice(queue.indexOf(entry), 1)
      const byRequest = new Map(taken.map(entry => [entry.request, entry.exchange]))
      const sending = (async () => {
        for (const request of order(taken.map(entry => entry.request))) {
          const exchange = byRequest.get(request)!
          for (let attempt = 0; attempt <= retries && !closing; attempt++) {
            const answer = await forwardRecorded(request, exchange).catch(() => undefined)
            if (answer && answer.status >= 200 && answer.status < 300) break
            await sleep(retryGapMs)
          }
        }
      })()
      detach(sending)
      await sending
    },
    async idle() {
      while (background.size > 0) await Promise.all(background)
    },
    inFlight: () => background.size,
    async close() {
      closing = true
      const closed = new Promise<void>(resolve => server.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}

/** Waits `ms`, or less when the caller closes its connection first. */
async function holdWhileConnected(req: http.IncomingMessage, ms: number): Promise<void> {
  const gone = new AbortController()
  const abort = () => gone.abort()
  req.socket.once('close', abort)
  await sleep(ms, undefined, { signal: gone.signal }).catch(() => {})
  req.socket.off('close', abort)
}
