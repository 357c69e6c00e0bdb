import { registry } from '../observability/metrics'

/**
 * Prometheus text exposition of this process's metrics (docs/operations.md#metrics), for operators
 * only: `Authorization: Bearer <OPS_TOKEN>`, else 401. Never cached: each scrape is a fresh
 * reading.
 */
export default defineEventHandler(async (event) => {
  requireOps(event)
  const body = await registry.metrics()
  setResponseHeaders(event, { 'Content-Type': registry.contentType, 'Cache-Control': 'no-store' })
  return body
})
