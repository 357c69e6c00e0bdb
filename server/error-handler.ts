import { STATUS_CODES } from 'node:http'
import type { NitroErrorHandler } from 'nitropack'
import { isDatabaseUnavailable } from '@idempotent-checkout/db-kit'
import { log } from './observability/logger'
import { noApiRouteDetail, problemBody, type ProblemBody, problemOf, type ProblemSlug, rawRequestPath, requestMethod } from './problems'

const slugByStatus: Record<number, ProblemSlug> = {
  400: 'validation-failed',
  401: 'unauthorized',
  404: 'not-found',
  405: 'method-not-allowed',
  413: 'payload-too-large',
  415: 'unsupported-media-type',
  503: 'service-unavailable',
}

/**
 * Every error under /api becomes RFC 9457 application/problem+json; pages fall through to Nuxt's
 * own error page (the next handler).
 */
export default <NitroErrorHandler> function problemErrorHandler(error, event) {
  if (!event.path.startsWith('/api/')) return
  const known = problemOf(error)
  const headers = { ...known?.headers }
  let body: ProblemBody
  if (known) {
    body = known.body
  }
  else if (isDatabaseUnavailable(error)) {
    // Wherever Postgres went away (tenant lookup, claim, commit), nothing was committed.
    body = problemBody('service-unavailable', 'The database is unreachable; nothing was committed. Retry with the same Idempotency-Key after Retry-After seconds.')
    headers['Retry-After'] = '2'
  }
  else {
    const status = error.statusCode ?? 500
    const slug = slugByStatus[status] ?? 'internal-error'
    body = problemBody(slug, status === 404
      ? noApiRouteDetail(event)
      : status === 405
        ? `${requestMethod(event)} is not allowed on ${rawRequestPath(event)}.`
        : 'Something went wrong on our side; nothing was committed. Retry the request (with the same Idempotency-Key, if it had one).')
    if (body.status >= 500) log.error('unhandled error', { requestId: event.context.requestId, path: event.path, error: error.cause ?? error })
  }
  const res = event.node.res
  if (res.headersSent) return
  res.statusCode = body.status
  // The standard reason phrase: whatever ran before (Nuxt's renderer says "Page not found: <path>") does not show.
  res.statusMessage = STATUS_CODES[body.status] ?? ''
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value)
  res.setHeader('Content-Type', 'application/problem+json')
  res.setHeader('X-Request-Id', event.context.clientRequestId ?? event.context.requestId ?? '')
  res.removeHeader('Location')
  res.removeHeader('Idempotent-Replayed')
  res.end(JSON.stringify(body))
}
