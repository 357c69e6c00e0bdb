import type { H3Event } from 'h3'
import postgres from 'postgres'
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, vi } from 'vitest'
import { type Database, type DatabaseHandle, openDatabase } from '@idempotent-checkout/db-kit'
import { requestLog, requestLogReplays } from '../../server/db/schema'
import { deleteOldRequestLogRows } from '../../server/maintenance/request-log-retention'
import { createMemoryLocks } from 'nuxt-idempotency/core'
import { logger, setLogLevel } from '../../server/observability/logger'
import { registry } from '../../server/observability/metrics'
import { createReplayCounter } from '../../server/observability/replay-counts'
import { createRequestLogWriter, flushRequestLog, recordRequest, type RequestLogRow, type RequestLogWriterOptions } from '../../server/observability/request-log'
import { openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices } from '../support/services'
import { proxyDatabase, type TcpProxy } from '../support/tcp-proxy'
import { testMigrations } from '../support/migrations'

// The request log is the evidence of every request, and a database outage is when it matters most:
// rows wait in a bounded queue and are retried until Postgres takes them, exactly once, one write at
// a time; retention deletes the old ones in batches. On real Postgres behind a TCP proxy that can
// cut or stall the app's connections while the test reads the database directly. A row the
// database refuses for its data never holds up the rest: its batch is split, the row quarantined.

/** Wraps the database's execute (the writer's only call) to see how many run at once and how they end. */
function observed(db: Database) {
  const stats = { active: 0, maxActive: 0, attempts: 0, failures: 0, failedAt: [] as number[] }
  const wrapped = new Proxy(db, {
    get(target, property, receiver) {
      if (property !== 'execute') return Reflect.get(target, property, receiver)
      return async (query: Parameters<Database['execute']>[0]) => {
        stats.attempts++
        stats.active++
        stats.maxActive = Math.max(stats.maxActive, stats.active)
        try {
          return await target.execute(query)
        }
        catch (error) {
          stats.failures++
          stats.failedAt.push(performance.now())
          throw error
        }
        finally {
          stats.active--
        }
      }
    },
  })
  return { db: wrapped, stats }
}

/** What recordRequest reads of an answered API request. */
function answeredRequest(requestId: string): H3Event {
  return {
    path: '/api/orders',
    method: 'POST',
    context: { requestId, startedAt: performance.now(), authenticatedBy: 'tenant_key' },
    node: { req: { url: '/api/orders', headers: {} }, res: { statusCode: 201 } },
  } as unknown as H3Event
}

const row = (requestId: string): RequestLogRow => ({
  requestId, method: 'POST', path: '/api/orders', status: 201, durationMs: 1, instance: 'request-log-test', createdAt: new Date(),
})

const ids = (label: string, count: number, from = 0) => Array.from({ length: count }, (_, index) => `req_${label}_${String(from + index).padStart(5, '0')}`)

async function counterValue(name: string): Promise<number> {
  const metric = await registry.getSingleMetric(name)!.get()
  return metric.values.reduce((sum, value) => sum + value.value, 0)
}

/** request_log_rows_quarantined_total by reason (those counted so far). */
async function quarantinedByReason(): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('request_log_rows_quarantined_total')!.get()
  return Object.fromEntries(metric.values.map(value => [String(value.labels.reason), value.value]))
}

/** What each reason's count grew by since `before` (reasons that did not grow left out). */
async function quarantinedSince(before: Record<string, number>): Promise<Record<string, number>> {
  const now = await quarantinedByReason()
  return Object.fromEntries(Object.entries(now).map(([reason, count]) => [reason, count - (before[reason] ?? 0)]).filter(([, grown]) => grown !== 0))
}

/** A row carrying a raw NUL, as if it had bypassed recordRequest's escaping: Postgres refuses it (22021). */
const poisoned = (requestId: string): RequestLogRow => ({ ...row(requestId), path: '/api/\u0000' })

/** The warnings of quarantined rows logged while `work` ran (the log level is error meanwhile). */
async function quarantineWarnings(work: () => Promise<void>): Promise<Array<Record<string, unknown>>> {
  const warn = vi.spyOn(logger, 'warn')
  try {
    await work()
    return warn.mock.calls
      .filter(([, msg]) => msg === 'request log row quarantined: the database refused its data')
      .map(([fields]) => fields as unknown as Record<string, unknown>)
  }
  finally {
    warn.mockRestore()
  }
}

/** An error as postgres.js reports a connection that closed under a query. */
const connectionClosed = () => Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' })

describeWithServices('request log writer on Postgres that goes away', ['postgres'], () => {
  let dropDatabase: () => Promise<void>
  let proxy: TcpProxy
  let handle: DatabaseHandle
  let direct: postgres.Sql

  beforeAll(async () => {
    // One line per recorded request otherwise.
    setLogLevel('error')
    const database = await createTestDatabase('request_log_writer')
    dropDatabase = database.drop
    const proxied = await proxyDatabase(database.url)
    proxy = proxied.proxy
    handle = await openDatabase({ url: proxied.url, pgliteDir: '', migrations: testMigrations, poolSize: 4 })
    direct = postgres(database.url, { max: 2, onnotice: () => {} })
  }, 60_000)

  afterAll(async () => {
    await handle?.close()
    await proxy?.close()
    await direct?.end()
    await dropDatabase?.()
  })

  beforeEach(async () => {
    await direct`delete from request_log`
  })

  afterEach(async () => {
    // Whatever a test left stalled or cut, the next one starts connected.
    proxy.resume()
    await proxy.restore().catch(() => {})
  })

  const written = async () => (await direct<Array<{ requestId: string }>>`select request_id as "requestId" from request_log order by id`).map(entry => entry.requestId)

  const options = (overrides: Partial<RequestLogWriterOptions> = {}): RequestLogWriterOptions => ({
    maxQueuedRows: 10_000, maxBatchRows: 100, flushEveryMs: 5, retryFirstMs: 50, retryMaxMs: 200, ...overrides,
  })

  it('recordRequest: one write at a time while Postgres stalls; rows whose write failed are kept, retried and land once, in order, when it returns', async () => {
    const { db, stats } = observed(handle.db)
    const requestIds = ids('outage', 600)
    // Stalled: the first full batch (500 rows) is sent and hangs; the rest must wait for it.
    proxy.pause()
    for (const requestId of requestIds) recordRequest(answeredRequest(requestId), db, true)
    await pollUntil('the first batch is being written', async () => stats.attempts >= 1)
    await new Promise(resolve => setTimeout(resolve, 300))
    expect(stats.maxActive).toBe(1)
    // Gone: the stalled write fails (its statement never reached Postgres), then every retry fails.
    await proxy.cut()
    proxy.resume()
    await pollUntil('two writes failed', async () => stats.failures >= 2, { timeoutMs: 10_000, intervalMs: 20 })
    expect(await written()).toEqual([])

    await proxy.restore()
    await flushRequestLog()
    expect(await written()).toEqual(requestIds)
    expect(stats.maxActive).toBe(1)
  })

  it('backs off between failed writes (doubling up to its cap) and never runs two writes at once', async () => {
    const { db, stats } = observed(handle.db)
    const writer = createRequestLogWriter(options())
    await proxy.cut()
    const requestIds = ids('backoff', 450)
    for (const requestId of requestIds) writer.enqueue(db, row(requestId))
    await pollUntil('five writes failed', async () => stats.failures >= 5, { timeoutMs: 10_000, intervalMs: 10 })
    const gaps = stats.failedAt.slice(1, 5).map((at, index) => at - stats.failedAt[index]!)
    // 50, 100, 200, 200 ms after each failure (a connection refused answers within milliseconds).
    expect(gaps.map((gap, index) => gap >= [50, 100, 200, 200][index]! - 5), JSON.stringify(gaps)).toEqual([true, true, true, true])
    expect(writer.size()).toBe(450)

    await proxy.restore()
    expect(await writer.flush(10_000)).toBe(0)
    expect(await written()).toEqual(requestIds)
    expect(stats.maxActive).toBe(1)
  })

  it('a full queue drops its oldest rows, counted in request_log_rows_dropped_total, and writes the newest', async () => {
    const { db, stats } = observed(handle.db)
    const writer = createRequestLogWriter(options({ maxQueuedRows: 100, maxBatchRows: 10 }))
    const droppedBefore = await counterValue('request_log_rows_dropped_total')
    await proxy.cut()
    const requestIds = ids('full', 150)
    for (const requestId of requestIds) writer.enqueue(db, row(requestId))
    await pollUntil('a write failed', async () => stats.failures >= 1, { timeoutMs: 10_000, intervalMs: 10 })
    expect(writer.size()).toBe(100)
    expect(await counterValue('request_log_rows_dropped_total') - droppedBefore).toBe(50)

    await proxy.restore()
    expect(await writer.flush(10_000)).toBe(0)
    expect(await written()).toEqual(requestIds.slice(50))
    expect(await counterValue('request_log_rows_dropped_total') - droppedBefore).toBe(50)
  })

  it('flush gives up after its time when Postgres is gone or stalled, and what it kept lands once afterwards', async () => {
    const { db } = observed(handle.db)
    const writer = createRequestLogWriter(options())
    const requestIds = ids('shutdown', 5)

    await proxy.cut()
    for (const requestId of requestIds) writer.enqueue(db, row(requestId))
    let started = performance.now()
    expect(await writer.flush(300)).toBe(5)
    expect(performance.now() - started).toBeGreaterThanOrEqual(295)
    expect(performance.now() - started).toBeLessThan(1_000)

    await proxy.restore()
    proxy.pause()
    started = performance.now()
    expect(await writer.flush(300)).toBe(5)
    expect(performance.now() - started).toBeLessThan(1_000)
    expect(await written()).toEqual([])

    // The stalled write goes through once Postgres answers again.
    proxy.resume()
    expect(await writer.flush(10_000)).toBe(0)
    expect(await written()).toEqual(requestIds)
  })

  it('a write that committed but whose answer was lost is not written twice by its retry', async () => {
    let lostAnswers = 1
    const answerLost = new Proxy(handle.db, {
      get(target, property, receiver) {
        if (property !== 'execute') return Reflect.get(target, property, receiver)
        return async (query: Parameters<Database['execute']>[0]) => {
          const result = await target.execute(query)
          if (lostAnswers-- > 0) throw new Error('connection closed after commit')
          return result
        }
      },
    })
    const writer = createRequestLogWriter(options())
    const requestIds = ids('lost', 30)
    for (const requestId of requestIds) writer.enqueue(answerLost, row(requestId))
    expect(await writer.flush(10_000)).toBe(0)
    expect(lostAnswers).toBe(-1)
    expect(await written()).toEqual(requestIds)
  })

  it('a poisoned batch while Postgres is gone: retried as a connection failure (nothing quarantined), then split once Postgres is back', async () => {
    const { db, stats } = observed(handle.db)
    const writer = createRequestLogWriter(options())
    const before = await quarantinedByReason()
    await proxy.cut()
    const requestIds = ids('poisoned_outage', 20)
    for (const requestId of requestIds) writer.enqueue(db, requestId === requestIds[7] ? poisoned(requestId) : row(requestId))
    await pollUntil('three writes failed', async () => stats.failures >= 3, { timeoutMs: 10_000, intervalMs: 10 })
    expect(writer.size()).toBe(20)
    expect(await quarantinedSince(before)).toEqual({})

    await proxy.restore()
    expect(await writer.flush(10_000)).toBe(0)
    expect(await written()).toEqual(requestIds.filter(requestId => requestId !== requestIds[7]))
    expect(await quarantinedSince(before)).toEqual({ 22021: 1 })
    expect(stats.maxActive).toBe(1)
  })
})

/** Rows the database refuses for their data, on both drivers the app runs on. */
function poisonedRowsContract(driver: 'postgres' | 'pglite') {
  let database: SuiteDatabase
  let db: Database

  beforeAll(async () => {
    setLogLevel('error')
    database = await openSuiteDatabase(driver, 'request_log_poison')
    db = database.handle.db
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  beforeEach(async () => {
    await db.delete(requestLog)
  })

  const written = async () => (await db.select({ requestId: requestLog.requestId }).from(requestLog).orderBy(requestLog.id)).map(entry => entry.requestId)

  const options: RequestLogWriterOptions = { maxQueuedRows: 10_000, maxBatchRows: 100, flushEveryMs: 5, retryFirstMs: 50, retryMaxMs: 200 }

  it('a raw NUL in one row: its batch is split, the row quarantined (logged, counted under 22021), the others and later rows written in order', async () => {
    const { db: watched, stats } = observed(db)
    const writer = createRequestLogWriter(options)
    const before = await quarantinedByReason()
    const requestIds = ids('poisoned', 64)
    const bad = requestIds[37]!
    const warnings = await quarantineWarnings(async () => {
      for (const requestId of requestIds) writer.enqueue(watched, requestId === bad ? poisoned(requestId) : row(requestId))
      expect(await writer.flush(10_000)).toBe(0)
    })
    expect(await written()).toEqual(requestIds.filter(requestId => requestId !== bad))
    expect(await quarantinedSince(before)).toEqual({ 22021: 1 })
    // One refused batch of 64, then halving down to the row: 1 + 2 per level (6 levels) = 13 statements.
    expect(stats.attempts).toBe(13)
    expect(stats.failures).toBe(7)
    expect(warnings).toEqual([{
      row: { requestId: bad, method: 'POST', path: '/api/%00', status: 201, durationMs: 1, instance: 'request-log-test', createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
      reason: '22021',
      error: 'database error 22021 character_not_in_repertoire',
    }])

    // Nothing waits behind it: the next rows are written at once, in one statement.
    const later = ids('after_poison', 5)
    for (const requestId of later) writer.enqueue(watched, row(requestId))
    expect(await writer.flush(10_000)).toBe(0)
    expect(await written()).toEqual([...requestIds.filter(requestId => requestId !== bad), ...later])
    expect(stats.attempts).toBe(14)
    expect(await quarantinedSince(before)).toEqual({ 22021: 1 })
  })

  it('every kind of refused data in one batch (22021, 23502 not-null, an invalid date): each bad row quarantined under its reason, the good ones written', async () => {
    const writer = createRequestLogWriter(options)
    const before = await quarantinedByReason()
    const requestIds = ids('mixed', 40)
    const broken: Record<string, (requestId: string) => RequestLogRow> = {
      [requestIds[0]!]: poisoned,
      [requestIds[9]!]: requestId => ({ ...row(requestId), clientRequestId: `client\u0000${requestId}` }),
      [requestIds[21]!]: requestId => ({ ...row(requestId), method: null as unknown as string }),
      [requestIds[39]!]: requestId => ({ ...row(requestId), createdAt: new Date(Number.NaN) }),
    }
    for (const requestId of requestIds) writer.enqueue(db, broken[requestId]?.(requestId) ?? row(requestId))
    expect(await writer.flush(10_000)).toBe(0)
    expect(await written()).toEqual(requestIds.filter(requestId => !broken[requestId]))
    expect(await quarantinedSince(before)).toEqual({ 22021: 2, 23502: 1, unencodable: 1 })
  })

  it('a connection failure in the middle of a split is retried with the backoff, from the rows not yet written, which skip what is already there', async () => {
    const { db: watched, stats } = observed(db)
    // The 3rd and 4th statements (the first half's halves, after one split) fail on the way.
    let statement = 0
    const flaky = new Proxy(watched, {
      get(target, property, receiver) {
        if (property !== 'execute') return Reflect.get(target, property, receiver)
        return async (query: Parameters<Database['execute']>[0]) => {
          statement++
          if (statement === 3 || statement === 4) throw connectionClosed()
          return target.execute(query)
        }
      },
    })
    const writer = createRequestLogWriter(options)
    const before = await quarantinedByReason()
    const requestIds = ids('split_outage', 16)
    const bad = requestIds[5]!
    for (const requestId of requestIds) writer.enqueue(flaky, requestId === bad ? poisoned(requestId) : row(requestId))
    const started = performance.now()
    expect(await writer.flush(10_000)).toBe(0)
    // Two retries: 50 and 100 ms of backoff.
    expect(performance.now() - started).toBeGreaterThanOrEqual(145)
    expect(await written()).toEqual(requestIds.filter(requestId => requestId !== bad))
    expect(await quarantinedSince(before)).toEqual({ 22021: 1 })
    expect(stats.maxActive).toBe(1)
  })

  it('a write that fails for another reason is never split nor quarantined: retried until it goes through', async () => {
    let failuresLeft = 3
    const refusing = new Proxy(db, {
      get(target, property, receiver) {
        if (property !== 'execute') return Reflect.get(target, property, receiver)
        return async (query: Parameters<Database['execute']>[0]) => {
          if (failuresLeft-- > 0) throw connectionClosed()
          return target.execute(query)
        }
      },
    })
    const writer = createRequestLogWriter(options)
    const before = await quarantinedByReason()
    const requestIds = ids('retried', 12)
    for (const requestId of requestIds) writer.enqueue(refusing, row(requestId))
    expect(await writer.flush(10_000)).toBe(0)
    expect(failuresLeft).toBe(-1)
    expect(await written()).toEqual(requestIds)
    expect(await quarantinedSince(before)).toEqual({})
  })
}

describeWithServices('request log: poisoned rows on Postgres', ['postgres'], () => poisonedRowsContract('postgres'))
describeWithServices('request log: poisoned rows on PGlite', [], () => poisonedRowsContract('pglite'))

/** The retention task on both drivers the app runs on. */
function retentionContract(driver: 'postgres' | 'pglite') {
  let database: SuiteDatabase
  let db: Database

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'request_log_retention')
    db = database.handle.db
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  async function insertRows(count: number, ageDays: number, label: string): Promise<void> {
    const createdAt = new Date(Date.now() - ageDays * 86_400_000)
    for (let from = 0; from < count; from += 500) {
      await db.insert(requestLog).values(ids(label, Math.min(500, count - from), from).map(requestId => ({ ...row(requestId), createdAt })))
    }
  }

  it('deletes request-log rows older than REQUEST_LOG_RETENTION_DAYS in batches, counts them, and keeps the rest', async () => {
    const locks = createMemoryLocks()
    // Many batches of 100 past the 14-day retention, deleted in one run; a day inside it and today are kept.
    await insertRows(2_550, 15, 'old')
    await insertRows(3, 13, 'recent')
    await insertRows(2, 0, 'today')
    const deletedBefore = await counterValue('request_log_rows_deleted_total')
    const pauses: number[] = []

    expect(await deleteOldRequestLogRows(db, locks, 14, { batchSize: 100, sleep: async ms => void pauses.push(ms) }))
      .toMatchObject({ skipped: false, deleted: 2_550, run: { batches: 26, drained: true } })
    // 26 batches (the last of 50), a pause after each but the last.
    expect(pauses).toHaveLength(25)
    const kept = await db.select({ requestId: requestLog.requestId }).from(requestLog).orderBy(requestLog.id)
    expect(kept.map(entry => entry.requestId)).toEqual([...ids('recent', 3), ...ids('today', 2)])
    expect(await counterValue('request_log_rows_deleted_total') - deletedBefore).toBe(2_550)

    expect(await deleteOldRequestLogRows(db, locks, 14)).toMatchObject({ skipped: false, deleted: 0 })
    // A shorter retention reaches the 13-day-old rows.
    expect(await deleteOldRequestLogRows(db, locks, 12)).toMatchObject({ skipped: false, deleted: 3 })
    await locks.close()
  })

  const counts = () => db.select({ key: requestLogReplays.idempotencyKey, instance: requestLogReplays.instance, minute: requestLogReplays.minute, replays: requestLogReplays.replays, firstAt: requestLogReplays.firstAt, lastAt: requestLogReplays.lastAt })
    .from(requestLogReplays).orderBy(requestLogReplays.idempotencyKey, requestLogReplays.minute)
  const replayOf = (key: string, at: Date) => ({ scope: 'tenant:ten_counts', key, tenantId: 'ten_counts', method: 'POST', path: '/api/orders', status: 201, at })

  it('replay counts: one row per key and minute with the instance\'s running total; writing a total again never lowers it', async () => {
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 120_000)
    const at = (ms: number) => new Date(minute.getTime() + ms)
    // The clock in the second minute: the first one ended, but not long enough ago to be forgotten.
    const now = () => minute.getTime() + 61_500
    const counter = createReplayCounter({ instance: 'host:1', flushEveryMs: 10_000, maxEntries: 100, now })
    for (let replay = 0; replay < 5; replay++) counter.count(db, replayOf('key-a', at(1000 + replay)))
    counter.count(db, replayOf('key-b', at(2000)))
    counter.count(db, replayOf('key-b', at(2001)))
    counter.count(db, replayOf('key-a', at(61_000)))
    expect(await counter.flush(5000)).toBe(0)
    expect(await counts()).toEqual([
      { key: 'key-a', instance: 'host:1', minute, replays: 5, firstAt: at(1000), lastAt: at(1004) },
      { key: 'key-a', instance: 'host:1', minute: at(60_000), replays: 1, firstAt: at(61_000), lastAt: at(61_000) },
      { key: 'key-b', instance: 'host:1', minute, replays: 2, firstAt: at(2000), lastAt: at(2001) },
    ])
    // A restarted writer under the same instance name, with a smaller total of the same minute: the row keeps the larger.
    const again = createReplayCounter({ instance: 'host:1', flushEveryMs: 10_000, maxEntries: 100, now })
    again.count(db, replayOf('key-b', at(3000)))
    counter.count(db, replayOf('key-a', at(1500)))
    await Promise.all([again.flush(5000), counter.flush(5000)])
    expect((await counts()).map(row => [row.key, row.minute.getTime(), row.replays, row.lastAt.getTime()])).toEqual([
      ['key-a', minute.getTime(), 6, at(1500).getTime()],
      ['key-a', at(60_000).getTime(), 1, at(61_000).getTime()],
      ['key-b', minute.getTime(), 2, at(3000).getTime()],
    ])
  })

  it('replay counts: past its bound the oldest minute is forgotten (counted), and retention deletes minutes past the request log\'s days', async () => {
    await db.delete(requestLogReplays)
    const forgottenBefore = await counterValue('request_log_replays_forgotten_total')
    const counter = createReplayCounter({ instance: 'host:2', flushEveryMs: 10_000, maxEntries: 2 })
    const old = new Date(Date.now() - 15 * 86_400_000)
    for (const key of ['old-1', 'old-2', 'old-3']) counter.count(db, replayOf(key, old))
    expect(await counterValue('request_log_replays_forgotten_total') - forgottenBefore).toBe(1)
    counter.count(db, replayOf('today', new Date()))
    expect(await counter.flush(5000)).toBe(0)
    expect((await counts()).map(row => row.key)).toEqual(['old-3', 'today'])
    const locks = createMemoryLocks()
    expect(await deleteOldRequestLogRows(db, locks, 14)).toMatchObject({ skipped: false, deleted: 1 })
    expect((await counts()).map(row => row.key)).toEqual(['today'])
    await locks.close()
  })
}

describeWithServices('request log retention on Postgres', ['postgres'], () => retentionContract('postgres'))
describeWithServices('request log retention on PGlite', [], () => retentionContract('pglite'))
