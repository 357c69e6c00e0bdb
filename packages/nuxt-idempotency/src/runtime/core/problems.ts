import { createError, type H3Error, type H3Event, send, setResponseHeader, setResponseHeaders, setResponseStatus } from 'h3'

/**
 * The layer's own problem types (RFC 9457), `type` `/problems/<slug>`. Thrown as h3 errors whose
 * `data.problem` is the body: an app's error handler renders it, and defineIdempotentEventHandler
 * answers it itself as application/problem+json.
 */
export const idempotencyProblems = {
  'idempotency-key-missing': { status: 400, title: 'Idempotency-Key header missing', explanation: 'This route changes state and needs an `Idempotency-Key` header: 1–255 visible ASCII characters, unique per intended operation (a UUID v4 is a good choice). Reuse the same key when you retry.' },
  'idempotency-key-invalid': { status: 400, title: 'Idempotency-Key header invalid', explanation: 'The key must be 1–255 visible ASCII characters (0x21–0x7E): no spaces, control characters or non-ASCII. Send it once, bare (`k1`) or as an RFC 8941 string (`"k1"`, the same key); a value opening with `"` that is not one valid string is refused.' },
  'idempotency-key-reused': { status: 422, title: 'Idempotency key reused with a different request', explanation: 'This key was already used for a request with a different method, route or body. Retries must resend exactly the same request; a new operation needs a new key.' },
  'request-in-progress': { status: 409, title: 'Request with this key is in progress', explanation: 'A request with the same key and body is still being processed. Retry after `Retry-After` seconds with the same key, or send `Prefer: wait=N` (N ≤ 10) to wait for its result.' },
  'request-too-large': { status: 413, title: 'Request body too large', explanation: 'The body is larger than this route accepts. Nothing ran and nothing was stored: send a smaller body (the limit is in `detail`), under the same key.' },
  'stored-response-unreadable': { status: 500, title: 'Stored response unreadable', explanation: 'The response stored for this key is encrypted under a key the server no longer has. Nothing ran again. The operator adds the old key back to NUXT_IDEMPOTENCY_ENCRYPTION_KEYS; the client retries later with the same key.' },
  'webhook-signature-invalid': { status: 401, title: 'Webhook signature invalid', explanation: 'The signature or timestamp headers are missing, wrong, or outside the ±300 s tolerance. Nothing was stored.' },
} as const satisfies Record<string, { status: number, title: string, explanation: string }>

export type IdempotencyProblemSlug = keyof typeof idempotencyProblems

export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  [extension: string]: unknown
}

/**
 * The h3 error that carries a problem: `data.problem` its body, `data.headers` its own headers. A
 * problem is an answer, not a fault: whoever renders it reads the body, never the stack (a cause
 * keeps its own), so none is captured; capturing one cost a tenth of a 404's CPU.
 */
export function problemError(body: ProblemBody, headers?: Record<string, string>, cause?: unknown): H3Error {
  const stackTraceLimit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return createError({ statusCode: body.status, statusMessage: body.title, data: { problem: body, headers }, cause })
  }
  finally {
    Error.stackTraceLimit = stackTraceLimit
  }
}

export function idempotencyProblem(slug: IdempotencyProblemSlug, detail: string, headers?: Record<string, string>): H3Error {
  const { status, title } = idempotencyProblems[slug]
  return problemError({ type: `/problems/${slug}`, title, status, detail }, headers)
}

/** The problem an error carries (ours, or an app's of the same shape); undefined for any other error. */
export function problemOf(error: unknown): { body: ProblemBody, headers?: Record<string, string> } | undefined {
  const data = (error as { data?: { problem?: ProblemBody, headers?: Record<string, string> } } | undefined)?.data
  return data?.problem ? { body: data.problem, headers: data.headers } : undefined
}

/** Answers a problem as application/problem+json (for apps whose error handler does not know the shape). */
export function sendProblem(event: H3Event, problem: { body: ProblemBody, headers?: Record<string, string> }): Promise<void> {
  setResponseStatus(event, problem.body.status, problem.body.title)
  if (problem.headers) setResponseHeaders(event, problem.headers)
  setResponseHeader(event, 'Content-Type', 'application/problem+json')
  return send(event, JSON.stringify(problem.body))
}
