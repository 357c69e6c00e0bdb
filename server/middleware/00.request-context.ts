import { randomUUID } from 'node:crypto'
import { databaseReady } from '../db'
import { noApiRouteDetail, problem, rawRequestPath } from '../problems'

const REQUEST_ID_PATTERN = /^[\x21-\x7E]{1,128}$/
/** W3C Trace Context: version-traceid-parentid-flags, lowercase hex; later versions may append fields. */
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7E]*)?$/
const ALL_ZEROS = /^0+$/
const ENCODED_QUESTION_MARK = /%3F/i
/** A `.` or `..` segment, its dots as they are or percent-encoded (`%2E%2E`, `.%2e`). */
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2E){1,2}(?=\/|$)/i

/**
 * Cross-cutting context only. Every request gets the server's own id (`req_<uuid>`): records,
 * orders, jobs and the request log store it, so no client can make its request pass for another's.
 * A valid client X-Request-Id (1–128 visible ASCII) is kept apart as the client's correlation id.
 * Every response carries X-Request-Id (the client's when valid, else the server's:
 * docs/api.md#errors-and-headers) and X-Server-Request-Id (always the server's). A valid
 * `traceparent` puts the caller's trace id on the request's log line, and no /api request runs
 * before the database is migrated and ready.
 *
 * HEAD is GET without the body (RFC 9110 §9.3.2), but the router knows only the methods route files
 * name: a HEAD request is routed as GET, and Node's response to a HEAD drops the body (and its
 * Content-Length, which RFC 9110 lets it leave out). The log and problems name it HEAD (requestMethod).
 *
 * Routes match on the path as sent: h3 decodes the path before routing and the router then cuts it
 * at the first `?`, so `/api/orders/%3Fx/cancel` would reach POST /api/orders. No route takes a
 * parameter that may hold a `?` (ids and SKUs never do), so a path with an encoded one is 404, as
 * the path as sent names no route (docs/api.md#errors-and-headers). Nor does a path with a `.` or
 * `..` segment, encoded or not: URL parsers and proxies resolve it into another path
 * (`/api/inventory/%2E%2E/adjustments` is `/api/adjustments` to them), while the router would take
 * it for a SKU or an id as it is.
 */
export default defineEventHandler(async (event) => {
  if (event.method === 'HEAD') event._method = 'GET'
  const offered = getHeader(event, 'x-request-id')
  const requestId = `req_${randomUUID()}`
  const clientRequestId = offered !== undefined && REQUEST_ID_PATTERN.test(offered) ? offered : undefined
  event.context.requestId = requestId
  event.context.clientRequestId = clientRequestId
  event.context.startedAt = performance.now()
  event.context.trace = parseTraceparent(getHeader(event, 'traceparent'))
  setResponseHeader(event, 'X-Request-Id', clientRequestId ?? requestId)
  setResponseHeader(event, 'X-Server-Request-Id', requestId)
  if (!event.path.startsWith('/api/') || event.path === '/api/health') return
  const path = rawRequestPath(event)
  if (ENCODED_QUESTION_MARK.test(path) || DOT_SEGMENT.test(path)) throw problem('not-found', noApiRouteDetail(event))
  try {
    await databaseReady()
  }
  catch (error) {
    throw problem('service-unavailable', 'The database is not ready. Retry after Retry-After seconds.', { headers: { 'Retry-After': '5' }, cause: error })
  }
})

/**
 * The trace of a valid header, else undefined (W3C Trace Context says: ignore it and start a new
 * trace). Invalid: version ff, all-zero ids, version 00 with extra fields, anything not lowercase
 * hex.
 */
function parseTraceparent(header: string | undefined): { traceId: string, parentId: string, sampled: boolean } | undefined {
  if (!header || header.length > 512) return undefined
  const match = TRACEPARENT_PATTERN.exec(header.trim())
  if (!match) return undefined
  const [, version, traceId, parentId, flags, extra] = match as unknown as [string, string, string, string, string, string | undefined]
  if (version === 'ff' || (version === '00' && extra !== undefined)) return undefined
  if (ALL_ZEROS.test(traceId) || ALL_ZEROS.test(parentId)) return undefined
  return { traceId, parentId, sampled: (Number.parseInt(flags, 16) & 1) === 1 }
}
