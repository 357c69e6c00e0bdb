import { hostname } from 'node:os'
import type { H3Event } from 'h3'
import type { Database } from '../db/client'
import { requestLog } from '../db/schema'
import { log } from './logger'

const instance = `${hostname()}:${process.pid}`
const FLUSH_EVERY_MS = 50
const MAX_BATCH = 500

type RequestLogEntry = typeof requestLog.$inferInsert
let pending: RequestLogEntry[] = []
let flushTimer: NodeJS.Timeout | undefined
let target: Database | undefined

/**
 * One log line and one request_log row per API request, after the response went out. Rows are
 * evidence for later, so they are written off the hot path in small multi-row batches (one commit
 * per batch instead of one per request); a failed write is logged, never fails a request.
 */
export function recordRequest(event: H3Event, db: Database | undefined, delivered: boolean): void {
  const context = event.context
  const entry = {
    requestId: context.requestId,
    method: event.method,
    path: event.path.split('?')[0]!.slice(0, 500),
    tenantId: context.tenant?.id ?? null,
    scope: context.idempotency?.scope ?? null,
    idempotencyKey: context.idempotency?.key ?? null,
    outcome: context.idempotencyOutcome ?? null,
    // 499 (as nginx logs it): the connection closed before the response was sent.
    status: delivered ? event.node.res.statusCode : 499,
    durationMs: Math.round(performance.now() - (context.startedAt ?? performance.now())),
    instance,
  }
  log.info('request', entry)
  if (!db) return
  target = db
  pending.push(entry)
  if (pending.length >= MAX_BATCH) void flushRequestLog()
  else flushTimer ??= setTimeout(() => void flushRequestLog(), FLUSH_EVERY_MS).unref()
}

/** Writes what is queued; also called on shutdown so no evidence is left in memory. */
export async function flushRequestLog(): Promise<void> {
  clearTimeout(flushTimer)
  flushTimer = undefined
  const batch = pending
  pending = []
  if (!batch.length || !target) return
  await target.insert(requestLog).values(batch)
    .catch(error => log.warn('request log rows not written', { rows: batch.length, error }))
}
