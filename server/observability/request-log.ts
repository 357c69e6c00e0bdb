import { hostname } from 'node:os'
import type { H3Event } from 'h3'
import type { Database } from '../db/client'
import { requestLog } from '../db/schema'
import { log } from './logger'

const instance = `${hostname()}:${process.pid}`

/**
 * One log line and one request_log row per API request, after the response went out: the row is
 * evidence for later, so it is written off the hot path and a failure to write it is only logged.
 */
export function recordRequest(event: H3Event, db: Database | undefined): void {
  const context = event.context
  const entry = {
    requestId: context.requestId,
    method: event.method,
    path: event.path.split('?')[0]!.slice(0, 500),
    tenantId: context.tenant?.id ?? null,
    scope: context.idempotency?.scope ?? null,
    idempotencyKey: context.idempotency?.key ?? null,
    outcome: context.idempotencyOutcome ?? null,
    status: event.node.res.statusCode,
    durationMs: Math.round(performance.now() - (context.startedAt ?? performance.now())),
    instance,
  }
  log.info('request', entry)
  if (!db) return
  db.insert(requestLog).values(entry).catch(error => log.debug('request log row not written', { requestId: entry.requestId, error }))
}
