import type { H3Error, H3Event } from 'h3'
import { type ProblemBody, problemError, problemOf } from 'nuxt-idempotency/core'
import { type ProblemSlug, problemCatalog } from './catalog'

// The body's shape and how a thrown error carries it are the idempotency layer's (it stores them).
export { problemCatalog, problemOf, type ProblemBody, type ProblemSlug }

export interface ProblemOptions {
  /** Extension members (e.g. `errors`, `orderId`). */
  extensions?: Record<string, unknown>
  /** Response headers that belong to the problem (e.g. `Retry-After`). */
  headers?: Record<string, string>
  cause?: unknown
}

/** Extensions never replace the standard members: `status` must stay the HTTP status. */
export function problemBody(slug: ProblemSlug, detail: string, extensions: Record<string, unknown> = {}): ProblemBody {
  const { status, title } = problemCatalog[slug]
  const { type: _type, title: _title, status: _status, detail: _detail, ...members } = extensions
  return { type: `/problems/${slug}`, title, status, detail, ...members }
}

/** An h3 error carrying a problem body; the error handler renders it as application/problem+json. */
export function problem(slug: ProblemSlug, detail: string, options: ProblemOptions = {}): H3Error {
  return problemError(problemBody(slug, detail, options.extensions), options.headers, options.cause)
}

/** The request target as the client sent it: the path percent-encoded (before the router decodes it) and the query. */
export function requestTarget(event: H3Event): string {
  return event.node.req.originalUrl ?? event.node.req.url ?? event.path
}

/** The request's path as the client sent it, without the query. */
export function rawRequestPath(event: H3Event): string {
  return requestTarget(event).split('?')[0]!
}

/** The method as the client sent it: a HEAD request is routed as GET (see the request-context middleware). */
export function requestMethod(event: H3Event): string {
  return event.node.req.method ?? event.method
}

/** What a 404 says of an /api path that no route serves (with the method asked for). */
export function noApiRouteDetail(event: H3Event): string {
  return `No API route matches ${requestMethod(event)} ${rawRequestPath(event)}. The routes are described at GET /api/openapi.json and rendered at /docs.`
}
