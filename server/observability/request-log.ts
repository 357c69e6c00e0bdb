import { hostname } from 'node:os'
import { sql } from 'drizzle-orm'
import type { H3Event } from 'h3'
import type { Database } from '@idempotent-checkout/db-kit'
import { dataRefusalCode, describeDatabaseError } from '@idempotent-checkout/db-kit'
import { ExpiringMap } from '@idempotent-checkout/db-kit/expiring-map'
import { requestLog } from '../db/schema'
import { rawRequestPath, requestMethod, requestTarget } from '../problems'
import { arrayLiteral } from './array-literal'
import { escapeHeaderValue, escapeText, log } from './logger'
import { metrics } from './metrics'
import { createReplayCounter } from './replay-counts'

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
 *
 * A batch the database refuses for its data (SQLSTATE class 22 or 23: a NUL in a text, a value out
 * of range, a missing column value) would be refused again however often it is retried, and every
 * later row would wait behind it. Such a batch is split in halves, each written in turn (and split
 * again if refused), until each refused row stands alone: it is quarantined — logged at warn with
 * its values escaped and counted in request_log_rows_quarantined_total — and the rows around it are
 * written, in order. Only failures of another kind (the connection, the server) are retried.
 */
export function createRequestLogWriter(options: RequestLogWriterOptions): RequestLogWriter {
  // The queue is queued.slice(head): dropping or taking from the front only moves `head`.
  let queued: RequestLogRow[] = []
  let head = 0
  /** Rows of the batch being written not yet written or quarantined: off the queue, back at its head if a write fails. */
  let inFlight = 0
  let target: Database | undefined
  let timer: NodeJS.Timeout | undefined
  let writing: Promise<void> | undefined
  /** 0 while writes succeed; otherwise the wait before the next attempt. */
  let retryMs = 0
  /** When that attempt is due (performance.now()). */
  let retryAt = 0
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
        const failed = await writeSplitting(target, batch, retried > 0)
        if (failed) {
          // Back at the head, in order; if the queue is now full, they are the oldest and go first.
          queued = failed.rows.concat(queued.slice(head))
          head = 0
          retriedRows += failed.rows.length
          dropOverflow()
          retryMs = retryMs ? Math.min(retryMs * 2, options.retryMaxMs) : options.retryFirstMs
          retryAt = performance.now() + retryMs
          log.warn('request log rows not written yet; retrying', { rows: failed.rows.length, queued: queuedRows(), retryInMs: retryMs, error: failed.error })
          return
        }
        retryMs = 0
      }
      finally {
        inFlight = 0
      }
    }
  }

  /**
   * Writes `rows` in one statement, or, when the database refuses it for its data, each half in
   * turn the same way; a refused row alone is quarantined. Resolves to nothing once every row is
   * written or quarantined, else to the rows not written (those of the write that failed and every
   * one after it, in order) and the failure, for the retry.
   */
  async function writeSplitting(db: Database, rows: RequestLogRow[], retried: boolean): Promise<{ rows: RequestLogRow[], error: unknown } | undefined> {
    const failure = await tryWrite(db, rows, retried)
    if (!failure) {
      inFlight -= rows.length
      return undefined
    }
    const { error, refusal } = failure
    if (!refusal) return { rows, error }
    if (rows.length === 1) {
      quarantine(rows[0]!, refusal, error)
      inFlight -= 1
      return undefined
    }
    // A refused statement wrote nothing: its halves are as new or as retried as it was.
    const middle = Math.ceil(rows.length / 2)
    const failed = await writeSplitting(db, rows.slice(0, middle), retried)
    if (failed) return { rows: failed.rows.concat(rows.slice(middle)), error: failed.error }
    return writeSplitting(db, rows.slice(middle), retried)
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
        const now = performance.now()
        const left = deadline - now
        if (left <= 0) break
        // A flush keeps the backoff too: it waits for the retry that is due, or for the write under way.
        if (!writing && retryMs && now < retryAt) await waitAtMost(undefined, Math.min(retryAt - now, left))
        else await waitAtMost(start(), left)
      }
      const left = queuedRows() + inFlight
      if (left) log.warn('request log rows left unwritten', { rows: left, waitedMs: timeoutMs })
      return left
    },
    size: () => queuedRows() + inFlight,
  }
}

interface WriteFailure {
  error: unknown
  /** Set when the rows' own data was refused: their SQLSTATE, or `unencodable`. */
  refusal?: string
}

/** One INSERT of `rows`: undefined when it committed, else how it failed. */
async function tryWrite(db: Database, rows: RequestLogRow[], retried: boolean): Promise<WriteFailure | undefined> {
  let statement: ReturnType<typeof insertBatch>
  try {
    statement = insertBatch(rows, retried)
  }
  catch (error) {
    // A value the statement cannot be built from (an invalid date): no retry will build it.
    return { error, refusal: 'unencodable' }
  }
  try {
    await db.execute(statement)
    return undefined
  }
  catch (error) {
    return { error, refusal: dataRefusalCode(error) }
  }
}

/** A row the database refused for its data: logged (every value escaped) and counted, never retried. */
function quarantine(row: RequestLogRow, reason: string, error: unknown): void {
  metrics.requestLogRowsQuarantined.inc({ reason })
  const createdAt = row.createdAt instanceof Date && Number.isFinite(row.createdAt.getTime()) ? row.createdAt.toISOString() : String(row.createdAt)
  log.warn('request log row quarantined: the database refused its data', {
    row: { ...escapeRowTexts({ ...row }), createdAt },
    reason,
    error: describeDatabaseError(error) ?? (error instanceof Error ? `${error.name}: ${escapeText(error.message, { maxLength: 200 })}` : 'unknown'),
  })
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

/** The server's writer's settings (the bench's writes floor batches with the same). */
export const REQUEST_LOG_WRITER_OPTIONS: RequestLogWriterOptions = {
  maxQueuedRows: MAX_QUEUED_ROWS,
  maxBatchRows: MAX_BATCH_ROWS,
  flushEveryMs: FLUSH_EVERY_MS,
  retryFirstMs: RETRY_FIRST_MS,
  retryMaxMs: RETRY_MAX_MS,
}

const writer = createRequestLogWriter(REQUEST_LOG_WRITER_OPTIONS)

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

/** Keys whose replay this minute was already logged at info, per instance: bounded, oldest out first. */
const MAX_SAMPLED_REPLAY_KEYS = 10_000

/**
 * Replays are a retry storm's bulk (a client looping on one key sends thousands): the first replay of
 * a key in each minute is logged at info and has its request_log row; the rest of that minute's are
 * logged at debug and counted (request_log_replays). Per instance, so with N instances a key shows
 * up to N lines and rows a minute. Returns whether this replay is one of the counted ones.
 */
export function createReplaySampler(maxKeys = MAX_SAMPLED_REPLAY_KEYS): (scope: string | null | undefined, key: string, now?: number) => boolean {
  const logged = new ExpiringMap<true>(maxKeys)
  return (scope, key, now = Date.now()) => {
    const minute = Math.floor(now / 60_000)
    const name = `${minute}\n${scope ?? ''}\n${key}`
    if (logged.get(name, now)) return true
    logged.set(name, true, (minute + 1) * 60_000)
    return false
  }
}

const routineReplay = createReplaySampler()
/** Minutes of replay counts kept per instance: as many as the sampler's keys. */
const replayCounter = createReplayCounter({ instance, flushEveryMs: FLUSH_EVERY_MS, maxEntries: MAX_SAMPLED_REPLAY_KEYS })

/** The longest path a row keeps, escapes included. */
export const MAX_PATH_LENGTH = 500
/** The longest refused X-Request-Id or Idempotency-Key a log line shows, escapes included. */
const MAX_REFUSED_HEADER_LENGTH = 300

/**
 * The request's path as the router decoded it, with what a text column cannot hold escaped (see
 * escapeText: control characters become %XX). The router's path is the decoded path followed by the
 * query as sent, so the query is cut off by its length: an encoded `?` (%3F) is part of the path, and
 * is written back as %3F so it never reads as a query. A path that does not decode to UTF-8 (%FF, an
 * overlong %C0%AF) is kept as it came over the wire, where its bytes already read %XX: the router's
 * fallback would double the encoding of any %25 or %2F in it. Either way every `%` in the result
 * starts an escape, and percent-decoding the result gives the path the client sent.
 */
export function requestPath(event: H3Event): string {
  const raw = rawRequestPath(event)
  const queryLength = requestTarget(event).length - raw.length
  let path = event.path.slice(0, event.path.length - queryLength).replaceAll('?', '%3F')
  try {
    decodeURIComponent(raw)
  }
  catch {
    path = raw
  }
  return escapeText(path, { maxLength: MAX_PATH_LENGTH })
}

/**
 * Escapes, in place, what a text column cannot hold in each text of a row (nothing changes in a clean
 * row). In place: a row is built per request, and copying each one showed in profiles.
 */
function escapeRowTexts(row: RequestLogRow): RequestLogRow {
  const texts = row as Record<string, unknown>
  for (const column of textColumns) {
    const value = texts[column]
    if (typeof value === 'string') texts[column] = escapeText(value)
  }
  return row
}

/**
 * One log line and one request_log row per API request (a key's repeated replays in a minute: a debug
 * line and a count, see createReplaySampler), after the response went out, and its duration in
 * http_request_duration_seconds. Rows are evidence for later, so they are written off
 * the hot path in batches (one commit per batch instead of one per request); a failed write is
 * retried, never fails a request. Nothing from the headers is logged but the request ids, the
 * Idempotency-Key and the traceparent's trace id: never Authorization or a cookie.
 *
 * What the client chose reaches the row and the line escaped (escapeText): the path, and the ids,
 * which are visible ASCII once checked, so the escape is only a last guard for them. An X-Request-Id
 * or Idempotency-Key the server refused is not the request's id or key, so the row keeps none; the
 * line shows it escaped (refusedClientRequestId, refusedIdempotencyKey), never silently dropped.
 */
export function recordRequest(event: H3Event, db: Database | undefined, delivered: boolean): void {
  const context = event.context
  const path = requestPath(event)
  const elapsedMs = performance.now() - (context.startedAt ?? performance.now())
  const row: RequestLogRow = escapeRowTexts({
    requestId: context.requestId,
    clientRequestId: context.clientRequestId ?? null,
    authenticatedBy: context.authenticatedBy ?? null,
    method: requestMethod(event),
    path,
    tenantId: context.tenant?.id ?? null,
    scope: context.idempotency?.scope ?? null,
    idempotencyKey: context.idempotency?.key ?? null,
    outcome: context.idempotencyOutcome ?? null,
    // 499 (as nginx logs it): the connection closed before the response was sent.
    status: delivered ? event.node.res.statusCode : 499,
    durationMs: Math.round(elapsedMs),
    instance,
  })
  const offeredRequestId = headerValue(event, 'x-request-id')
  const offeredKey = row.outcome === 'invalid' ? headerValue(event, 'idempotency-key') : undefined
  // The matched route pattern (e.g. /api/webhooks/:provider), never the raw path: a bounded label.
  const route = context.matchedRoute?.path ?? 'unmatched'
  metrics.httpDuration.observe({ method: row.method, route, status: String(row.status) }, elapsedMs / 1000)
  const scrape = path === METRICS_PATH && row.status === 200
  // A replay of a key already replayed this minute here: a debug line, and a count instead of a row.
  const countedReplay = row.outcome === 'replay' && row.idempotencyKey != null && row.scope != null
    && row.durationMs < SLOW_REQUEST_MS && routineReplay(row.scope, row.idempotencyKey)
  log[scrape || countedReplay || isRoutineRead(row) ? 'debug' : 'info']('request', {
    ...row,
    route,
    operation: context.idempotency?.route,
    fingerprintPrefix: context.idempotency?.fingerprintPrefix,
    traceId: context.trace?.traceId,
    refusedClientRequestId: offeredRequestId !== undefined && offeredRequestId !== context.clientRequestId ? escapeHeaderValue(offeredRequestId, MAX_REFUSED_HEADER_LENGTH) : undefined,
    refusedIdempotencyKey: offeredKey !== undefined ? escapeHeaderValue(offeredKey, MAX_REFUSED_HEADER_LENGTH) : undefined,
  })
  if (!db || scrape) return
  // The row's time is when the request started, so a timeline orders requests as they arrived, not
  // as they finished (a request whose client left is written only once its handler ended). Set
  // after the log line, which is serialized at once, so one object serves both.
  row.createdAt = new Date(Date.now() - elapsedMs)
  if (countedReplay) {
    replayCounter.count(db, { scope: row.scope!, key: row.idempotencyKey!, tenantId: row.tenantId ?? null, method: row.method, path: row.path, status: row.status, at: row.createdAt })
  }
  else {
    writer.enqueue(db, row)
  }
}

/** A request header as Node read it (latin1, one character per byte); repeated ones joined as Node joins them. */
function headerValue(event: H3Event, name: string): string | undefined {
  const value = event.node.req.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

/** Drains the queue on shutdown, giving up after SHUTDOWN_FLUSH_MS when the database is gone. */
export async function flushRequestLog(): Promise<void> {
  await Promise.all([writer.flush(SHUTDOWN_FLUSH_MS), replayCounter.flush(SHUTDOWN_FLUSH_MS)])
}

/** Each column and the Postgres type its values travel as. */
const batchColumns = [
  ['requestId', 'text'], ['clientRequestId', 'text'], ['authenticatedBy', 'text'], ['method', 'text'], ['path', 'text'],
  ['tenantId', 'text'], ['scope', 'text'], ['idempotencyKey', 'text'], ['outcome', 'text'], ['status', 'int'],
  ['durationMs', 'int'], ['instance', 'text'], ['createdAt', 'timestamptz'],
] as const satisfies ReadonlyArray<readonly [keyof RequestLogRow, string]>

const textColumns = batchColumns.flatMap(([column, type]) => (type === 'text' ? [column] : []))

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
  if (!retried) return sql`insert into ${requestLog} (${columnNames}) select * from unnest(${arrays}) as batch(${columnNames})`
  // The anti-join may be planned as a hash join, which does not keep the batch's order: the ids
  // (the order the rows landed in) follow each row's position in the batch.
  return sql`insert into ${requestLog} (${columnNames})
    select ${columnNames} from unnest(${arrays}) with ordinality as batch(${columnNames}, position)
    where not exists (select 1 from ${requestLog} written where written.request_id = batch.request_id)
    order by position`
}
