import { randomUUID } from 'node:crypto'
import { databaseReady } from '../db'
import { problem } from '../problems'

const REQUEST_ID_PATTERN = /^[\x21-\x7E]{1,128}$/

/**
 * Cross-cutting context only: every response carries X-Request-Id (the client's when it is 1–128
 * visible ASCII characters, otherwise a generated one), and no /api request runs before the
 * database is migrated and ready.
 */
export default defineEventHandler(async (event) => {
  const offered = getHeader(event, 'x-request-id')
  event.context.requestId = offered && REQUEST_ID_PATTERN.test(offered) ? offered : `req_${randomUUID()}`
  event.context.startedAt = performance.now()
  setResponseHeader(event, 'X-Request-Id', event.context.requestId)
  if (!event.path.startsWith('/api/') || event.path === '/api/health') return
  try {
    await databaseReady()
  }
  catch (error) {
    throw problem('service-unavailable', 'The database is not ready. Retry after Retry-After seconds.', { headers: { 'Retry-After': '5' }, cause: error })
  }
})
