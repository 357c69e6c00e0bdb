import { hostname } from 'node:os'
import { sql } from 'drizzle-orm'
import type { H3Event } from 'h3'
import type { Database } from '../db/client'
import { requestLog } from '../db/schema'
import { log } from './logger'
import { metrics } from './metrics'

const instance = `${hostname()}:${process.pid}`
const FLUSH_EVERY_MS = 50
const MAX_BATCH = 500

type RequestLogEntry = typeof requestLog.$inferInsert
let pending: RequestLogEntry[] = []
let flushTimer: NodeJS.Timeout | undefined
let target: Database | undefined

/** Successful scrapes are not evidence: no request_log row for them, and their log line is debug. */
const METRICS_PATH = '/api/metrics'

/**
 * One log line and one request_log row per API request, after the response went out, and its
 * duration in http_request_duration_seconds. Rows are evidence for later, so they are written off
 * the hot path in small multi-row batches (one commit per batch instead of one per request); a
 * failed write is logged, never fails a request. Nothing from the headers is logged but the
 * request id and the traceparent's trace id: never Authorization or a cookie.
 */
export function recordRequest(event: H3Event, db: Database | undefined, delivered: boolean): void {
  const context = event.context
  const path = event.path.split('?')[0]!.slice(0, 500)
  const elapsedMs = performance.now() - (context.startedAt ?? performance.now())
  const entry = {
    requestId: context.requestId,
    method: event.method,
    path,
    tenantId: context.tenant?.id ?? null,
    scope: context.idempotency?.scope ?? null,
    idempotencyKey: context.idempotency?.key ?? null,
    outcome: context.idempotencyOutcome ?? null,
    // 499 (as nginx logs it): the connection closed before the response was sent.
    status: delivered ? event.node.res.statusCode : 499,
    durationMs: Math.round(elapsedMs),
    instance,
  }
  // The matched route pattern (e.g. /api/webhooks/:provider), never the raw path: a bounded label.
  const route = context.matchedRoute?.path ?? 'unmatched'
  metrics.httpDuration.observe({ method: entry.method, route, status: String(entry.status) }, elapsedMs / 1000)
  const scrape = path === METRICS_PATH && entry.status === 200
  log[scrape ? 'debug' : 'info']('request', {
    ...entry,
    route,
    operation: context.idempotency?.route,
    fingerprintPrefix: context.idempotency?.fingerprintPrefix,
    traceId: context.trace?.traceId,
  })
  if (!db || scrape) return
  target = db
  // The row's time is when the request started, so a timeline orders requests as they arrived, not
  // as they finished (a request whose client left is written only once its handler ended).
  pending.push({ ...entry, createdAt: new Date(Date.now() - elapsedMs) })
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
  await target.execute(insertBatch(batch))
    .catch(error => log.warn('request log rows not written', { rows: batch.length, error }))
}

/** Each column and the Postgres type its values travel as. */
const batchColumns = [
  ['requestId', 'text'], ['method', 'text'], ['path', 'text'], ['tenantId', 'text'], ['scope', 'text'],
  ['idempotencyKey', 'text'], ['outcome', 'text'], ['status', 'int'], ['durationMs', 'int'],
  ['instance', 'text'], ['createdAt', 'timestamptz'],
] as const satisfies ReadonlyArray<readonly [keyof RequestLogEntry, string]>

/**
 * One statement of the same text whatever the batch size, each column one array parameter:
 * building a multi-row VALUES list value by value cost more CPU than the insert itself.
 */
function insertBatch(batch: RequestLogEntry[]) {
  const names = sql.join(batchColumns.map(([column]) => sql.identifier(requestLog[column].name)), sql`, `)
  const arrays = sql.join(batchColumns.map(([column, type]) => {
    const values = batch.map(entry => (column === 'createdAt' ? entry.createdAt?.toISOString() : entry[column]) ?? null)
    return sql`${arrayLiteral(values)}::${sql.raw(type)}[]`
  }), sql`, `)
  return sql`insert into ${requestLog} (${names}) select * from unnest(${arrays})`
}

/** A Postgres array literal, every element quoted (so commas, braces and quotes in a path are data). */
function arrayLiteral(values: Array<string | number | null | undefined>): string {
  return `{${values.map(value => (value == null ? 'NULL' : `"${String(value).replace(/[\\"]/g, match => `\\${match}`)}"`)).join(',')}}`
}
