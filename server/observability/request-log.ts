import { hostname } from 'node:os'
import { sql } from 'drizzle-orm'
import type { H3Event } from 'h3'
import type { Database } from '../db/client'
import { requestLog } from '../db/schema'
import { log } from './logger'
import { metrics } from './metrics'

const instance = `${hostname()}:${process.pid}`

/**
 * Rows waiting in memory at most while the database cannot take them (~500 bytes each: some 25 MB),
 * besides the batch being written. Beyond it the oldest rows are dropped, counted in
 * request_log_rows_dropped_total.
 */
export const MAX_QUEUED_ROWS = 50_000
/** Rows per INSERT. */
export const MAX_BATCH_ROWS = 500
/** How long a row waits for companions before a batch is written. */
export const FLUSH_EVERY_MS = 50
/** After a failed write the same rows are retried after 100 ms, doubling up to 5 s. */
export const RETRY_FIRST_MS = 100
export const RETRY_MAX_MS = 5_000
/** Shutdown waits this long at most for the queue to drain; a database that is gone cannot hold the exit. */
export const SHUTDOWN_FLUSH_MS = 5_000
/** At most one warning per this interval while rows are dropped. */
const DROP_WARNING_EVERY_MS = 10_000

export type RequestLogRow = typeof requestLog.$inferInsert

export interface RequestLogWriterOptions {
  maxQueuedRows: number
  maxBatchRows: number
  flushEveryMs: number
  retryFirstMs: number
  retryMaxMs: number
}

export interface RequestLogWriter {
  /** Queues a row for `db`; a full queue drops its oldest row. */
  enqueue: (db: Database, row: RequestLogRow) => void
  /**
   * Writes what is queued, retrying with the backoff, until the queue is empty or `timeoutMs`
   * passed; resolves to the number of rows still queued.
   */
  flush: (timeoutMs?: number) => Promise<number>
  /** Rows queued or being written. */
  size: () => number
}

/**
 * Request-log rows are evidence, and a database outage is when they matter most: a failed write
 * keeps its rows at the head of the queue and is retried with a backoff, never dropped. One write
 * at a time, so batches land in arrival order and a slow database is not sent a pile of them.
 * The queue is bounded: past `maxQueuedRows` the oldest rows go (counted and logged), not the
 * process's memory.
 */
export function createRequestLogWriter(options: RequestLogWriterOptions): RequestLogWriter {
  // The queue is queued.slice(head): dropping or taking from the front only moves `head`.
  let queued: RequestLogRow[] = []
  let head = 0
  /** The batch being written: off the queue, back at its head if the write fails. */
  let inFlight = 0
  let target: Database | undefined
  let timer: NodeJS.Timeout | undefined
  let writing: Promise<void> | undefined
  /** 0 while writes succeed; otherwise the wait before the next attempt. */
  let retryMs = 0
  /**
   * Rows at the head of the queue whose write failed: it may have committed before its answer was
   * lost, so their retry skips what is already there.
   */
  let retriedRows = 0
  let droppedSinceWarning = 0
  let lastDropWarning = 0

  const queuedRows = () => queued.length - head

  function compact(): void {
    if (head > 1024 && head * 2 > queued.length) {
      queued = queued.slice(head)
      head = 0
    }
  }

  /** Drops the oldest rows beyond the bound. */
  function dropOverflow(): void {
    const count = queuedRows() - options.maxQueuedRows
    if (count <= 0) return
    head += count
    retriedRows = Math.max(0, retriedRows - count)
    compact()
    metrics.requestLogRowsDropped.inc({}, count)
    droppedSinceWarning += count
    const now = Date.now()
    if (now - lastDropWarning >= DROP_WARNING_EVERY_MS) {
      log.warn('request log queue full; oldest rows dropped', { dropped: droppedSinceWarning, queued: queuedRows(), maxQueuedRows: options.maxQueuedRows })
      droppedSinceWarning = 0
      lastDropWarning = now
    }
  }

  function schedule(): void {
    if (timer || writing || !queuedRows()) return
    const delay = retryMs || (queuedRows() >= options.maxBatchRows ? 0 : options.flushEveryMs)
    timer = setTimeout(() => {
      timer = undefined
      void start()
    }, delay).unref()
  }

  function start(): Promise<void> {
    if (writing) return writing
    clearTimeout(timer)
    timer = undefined
    writing = writeQueued().finally(() => {
      writing = undefined
      schedule()
    })
    return writing
  }

  /**
   * Writes one batch, then more only while full batches wait: rows that arrived during a write
   * wait for companions (the next timer) instead of going out a few at a time, one commit each.
   */
  async function writeQueued(): Promise<void> {
    for (let first = true; target && (first ? queuedRows() > 0 : queuedRows() >= options.maxBatchRows); first = false) {
      const batch = queued.slice(head, head + options.maxBatchRows)
      const retried = Math.min(retriedRows, batch.length)
      retriedRows -= retried
      head += batch.length
      compact()
      inFlight = batch.length
      try {
        await target.execute(insertBatch(batch, retried > 0))
        retryMs = 0
      }
      catch (error) {
        // Back at the head, in order; if the queue is now full, they are the oldest and go first.
        queued = batch.concat(queued.slice(head))
        head = 0
        retriedRows += batch.length
        dropOverflow()
        retryMs = retryMs ? Math.min(retryMs * 2, options.retryMaxMs) : options.retryFirstMs
        log.warn('request log rows not written yet; retrying', { rows: batch.length, queued: queuedRows(), retryInMs: retryMs, error })
        return
      }
      finally {
        inFlight = 0
      }
    }
  }

  return {
    enqueue(db, row) {
      target = db
      queued.push(row)
      dropOverflow()
      if (queuedRows() >= options.maxBatchRows && !retryMs) void start()
      else schedule()
    },
    async flush(timeoutMs = SHUTDOWN_FLUSH_MS) {
      const deadline = performance.now() + timeoutMs
      while (queuedRows() || writing) {
        const left = deadline - performance.now()
        if (left <= 0) break
        await waitAtMost(start(), left)
        if (queuedRows() && retryMs) await waitAtMost(undefined, Math.min(retryMs, deadline - performance.now()))
      }
      const left = queuedRows() + inFlight
      if (left) log.warn('request log rows left unwritten', { rows: left, waitedMs: timeoutMs })
      return left
    },
    size: () => queuedRows() + inFlight,
  }
}

/** Resolves when `work` settles or after `ms`, whichever is first. */
function waitAtMost(work: Promise<void> | undefined, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timeout = setTimeout(resolve, Math.max(0, ms))
    work?.then(() => {
      clearTimeout(timeout)
      resolve()
    })
  })
}

const writer = createRequestLogWriter({
  maxQueuedRows: MAX_QUEUED_ROWS,
  maxBatchRows: MAX_BATCH_ROWS,
  flushEveryMs: FLUSH_EVERY_MS,
  retryFirstMs: RETRY_FIRST_MS,
  retryMaxMs: RETRY_MAX_MS,
})

/** Successful scrapes are not evidence: no request_log row for them, and their log line is debug. */
const METRICS_PATH = '/api/metrics'
/** A read that took longer is logged at info like a write: slowness is worth seeing. */
export const SLOW_REQUEST_MS = 1000

/**
 * Reads that went well (the checkout page polls its order every second, probes ask for /api/ready)
 * are logged at debug, or they drown the rest; writes, failures, slow reads and operators' reads
 * stay at info. Their request_log rows are written all the same: the evidence is complete.
 */
export function isRoutineRead(row: Pick<RequestLogRow, 'method' | 'status' | 'durationMs' | 'authenticatedBy'>): boolean {
  return (row.method === 'GET' || row.method === 'HEAD') && row.status < 400
    && row.durationMs < SLOW_REQUEST_MS && row.authenticatedBy !== 'ops_token'
}

/**
 * One log line and one request_log row per API request, after the response went out, and its
 * duration in http_request_duration_seconds. Rows are evidence for later, so they are written off
 * the hot path in batches (one commit per batch instead of one per request); a failed write is
 * retried, never fails a request. Nothing from the headers is logged but the request ids and the
 * traceparent's trace id: never Authorization or a cookie.
 */
export function recordRequest(event: H3Event, db: Database | undefined, delivered: boolean): void {
  const context = event.context
  const path = event.path.split('?')[0]!.slice(0, 500)
  const elapsedMs = performance.now() - (context.startedAt ?? performance.now())
  const row: RequestLogRow = {
    requestId: context.requestId,
    clientRequestId: context.clientRequestId ?? null,
    authenticatedBy: context.authenticatedBy ?? null,
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
  metrics.httpDuration.observe({ method: row.method, route, status: String(row.status) }, elapsedMs / 1000)
  const scrape = path === METRICS_PATH && row.status === 200
  log[scrape || isRoutineRead(row) ? 'debug' : 'info']('request', {
    ...row,
    route,
    operation: context.idempotency?.route,
    fingerprintPrefix: context.idempotency?.fingerprintPrefix,
    traceId: context.trace?.traceId,
  })
  if (!db || scrape) return
  // The row's time is when the request started, so a timeline orders requests as they arrived, not
  // as they finished (a request whose client left is written only once its handler ended). Set
  // after the log line, which is serialized at once, so one object serves both.
  row.createdAt = new Date(Date.now() - elapsedMs)
  writer.enqueue(db, row)
}

/** Drains the queue on shutdown, giving up after SHUTDOWN_FLUSH_MS when the database is gone. */
export async function flushRequestLog(): Promise<void> {
  await writer.flush(SHUTDOWN_FLUSH_MS)
}

/** Each column and the Postgres type its values travel as. */
const batchColumns = [
  ['requestId', 'text'], ['clientRequestId', 'text'], ['authenticatedBy', 'text'], ['method', 'text'], ['path', 'text'],
  ['tenantId', 'text'], ['scope', 'text'], ['idempotencyKey', 'text'], ['outcome', 'text'], ['status', 'int'],
  ['durationMs', 'int'], ['instance', 'text'], ['createdAt', 'timestamptz'],
] as const satisfies ReadonlyArray<readonly [keyof RequestLogRow, string]>

const columnNames = sql.join(batchColumns.map(([column]) => sql.identifier(requestLog[column].name)), sql`, `)

/**
 * One statement of the same text whatever the batch size, each column one array parameter:
 * building a multi-row VALUES list value by value cost more CPU than the insert itself. A retried
 * batch skips the rows already there (by the server's request id, one per request): the failed
 * attempt may have committed before its answer was lost.
 */
function insertBatch(batch: RequestLogRow[], retried: boolean) {
  const arrays = sql.join(batchColumns.map(([column, type]) => {
    const values = batch.map(row => (column === 'createdAt' ? row.createdAt?.toISOString() : row[column]) ?? null)
    return sql`${arrayLiteral(values)}::${sql.raw(type)}[]`
  }), sql`, `)
  const rows = sql`select * from unnest(${arrays}) as batch(${columnNames})`
  if (!retried) return sql`insert into ${requestLog} (${columnNames}) ${rows}`
  return sql`insert into ${requestLog} (${columnNames}) ${rows}
    where not exists (select 1 from ${requestLog} written where written.request_id = batch.request_id)`
}

/** A Postgres array literal, every element quoted (so commas, braces and quotes in a path are data). */
function arrayLiteral(values: Array<string | number | Date | null | undefined>): string {
  return `{${values.map(value => (value == null ? 'NULL' : `"${String(value).replace(/[\\"]/g, match => `\\${match}`)}"`)).join(',')}}`
}
