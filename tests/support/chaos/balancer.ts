import http from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A tiny round-robin HTTP load balancer in front of whatever app instances are alive right now:
 * one stable URL while instances die and come back on new ports. A refused connection tries the
 * next instance (nothing was sent); any other upstream failure, or no live instance at all, is a
 * 502 of the balancer's own, marked with the `x-chaos-balancer` header so that nobody mistakes it
 * for an answer of the app.
 */

/** Set on every response the balancer made up itself (the value says why). */
export const balancerHeader = 'x-chaos-balancer'

/** What went through: the upstream's status, or the balancer's own 502. */
export interface ProxiedAnswer {
  path: string
  /** Request headers as the client sent them (the load generator marks its own requests). */
  requestHeaders: http.IncomingHttpHeaders
  status: number
  retryAfter: string | null
  /** Why the balancer answered itself, or undefined for an upstream answer. */
  balancerReason?: string
}

export interface Balancer {
  url: string
  close: () => Promise<void>
}

// Per connection, not end to end: never forwarded.
const hopByHop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'host', 'content-length'])

export async function startBalancer(options: {
  /** The live instances' base URLs, read on every request. */
  targets: () => string[]
  onAnswer: (answer: ProxiedAnswer) => void
}): Promise<Balancer> {
  let next = 0
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const targets = options.targets()
      const start = next++
      const answerItself = (reason: string) => {
        // The instance died mid-answer: the client must see a broken response, not a short one.
        if (res.headersSent || res.destroyed) {
          res.destroy()
          return
        }
        options.onAnswer({ path: req.url!, requestHeaders: req.headers, status: 502, retryAfter: null, balancerReason: reason })
        res.writeHead(502, { 'content-type': 'text/plain', [balancerHeader]: reason })
        res.end(`balancer: ${reason}`)
      }
      const tryTarget = (attempt: number) => {
        if (attempt >= targets.length) return answerItself(targets.length ? 'every instance refused the connection' : 'no live instance')
        const target = new URL(targets[(start + attempt) % targets.length]!)
        const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !hopByHop.has(name)))
        const upstream = http.request({
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...headers, 'content-length': String(body.length) },
          agent: false,
        }, (upstreamResponse) => {
          options.onAnswer({
            path: req.url!,
            requestHeaders: req.headers,
            status: upstreamResponse.statusCode!,
            retryAfter: (upstreamResponse.headers['retry-after'] as string | undefined) ?? null,
          })
          const responseHeaders = Object.fromEntries(Object.entries(upstreamResponse.headers).filter(([name]) => !hopByHop.has(name)))
          res.writeHead(upstreamResponse.statusCode!, responseHeaders)
          upstreamResponse.pipe(res)
          upstreamResponse.once('aborted', () => res.destroy())
        })
        upstream.once('error', (error: NodeJS.ErrnoException) => {
          if (error.code === 'ECONNREFUSED') tryTarget(attempt + 1)
          else answerItself(`upstream ${target.host} failed: ${error.code ?? error.message}`)
        })
        // The client gave up: so does the upstream request.
        res.once('close', () => { if (!res.writableFinished) upstream.destroy() })
        upstream.end(body)
      }
      tryTarget(0)
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}
