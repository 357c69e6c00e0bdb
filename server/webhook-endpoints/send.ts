import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { AddressRefusedError, assertPublicLiteral, publicOnlyLookup } from './address-guard'

/** What is read of an endpoint's answer at most; the rest is not waited for. */
export const MAX_RESPONSE_BYTES = 64 * 1024
/** What of the answer is kept with the attempt (webhook_attempts.response_excerpt). */
export const RESPONSE_EXCERPT_BYTES = 1024

export interface WebhookPost {
  url: string
  headers: Record<string, string>
  body: string
  timeoutMs: number
  /** WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: connect wherever the host resolves. */
  allowPrivate: boolean
  signal?: AbortSignal
}

export interface WebhookAnswer {
  /** The endpoint's status; undefined when none came (timeout, connection refused, address refused). */
  statusCode?: number
  /** Why no status came, in a few words. */
  error?: string
  responseExcerpt?: string
  latencyMs: number
}

/**
 * One POST to an endpoint, bounded in time (connect, send and answer together) and in what is read
 * of the answer. No redirect is followed: a 3xx is the endpoint's answer. The connection goes only
 * to a public address unless `allowPrivate` (see address-guard.ts).
 */
export function postWebhook(post: WebhookPost): Promise<WebhookAnswer> {
  const started = performance.now()
  const latencyMs = () => Math.round(performance.now() - started)
  return new Promise((resolve) => {
    let settled = false
    const settle = (answer: Omit<WebhookAnswer, 'latencyMs'>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      post.signal?.removeEventListener('abort', onAbort)
      outgoing?.destroy()
      resolve({ ...answer, latencyMs: latencyMs() })
    }
    const timer = setTimeout(() => settle({ error: `timeout: no complete answer within ${post.timeoutMs} ms` }), post.timeoutMs)
    const onAbort = () => settle({ error: 'aborted: the worker stopped this attempt' })
    post.signal?.addEventListener('abort', onAbort, { once: true })

    let outgoing: ReturnType<typeof httpRequest> | undefined
    try {
      const url = new URL(post.url)
      if (!post.allowPrivate) assertPublicLiteral(url)
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest
      outgoing = send(url, {
        method: 'POST',
        headers: { ...post.headers, 'content-length': String(Buffer.byteLength(post.body)) },
        ...(!post.allowPrivate && { lookup: publicOnlyLookup }),
        // A fresh connection per attempt: a pooled socket would skip the address check of a new lookup.
        agent: false,
      })
    }
    catch (error) {
      settle({ error: describeSendError(error) })
      return
    }
    outgoing.on('error', error => settle({ error: describeSendError(error) }))
    outgoing.on('response', (response: IncomingMessage) => readBounded(response, excerpt => settle({ statusCode: response.statusCode, responseExcerpt: excerpt })))
    outgoing.end(post.body)
  })
}

/** Reads up to MAX_RESPONSE_BYTES, then stops (the caller destroys the connection); answers the excerpt. */
function readBounded(response: IncomingMessage, done: (excerpt: string) => void): void {
  const chunks: Buffer[] = []
  let size = 0
  const finish = () => done(Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString('utf8'))
  response.on('data', (chunk: Buffer) => {
    if (size < RESPONSE_EXCERPT_BYTES) chunks.push(chunk)
    size += chunk.length
    if (size >= MAX_RESPONSE_BYTES) finish()
  })
  response.on('end', finish)
  // The endpoint closing mid-answer still answered with its status.
  response.on('error', finish)
  response.on('aborted', finish)
}

function describeSendError(error: unknown): string {
  if (error instanceof AddressRefusedError) return `address refused: ${error.message}`
  const code = (error as { code?: string }).code
  const message = error instanceof Error ? error.message : String(error)
  return code && !message.includes(code) ? `${code}: ${message}` : message
}
