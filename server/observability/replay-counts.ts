import { sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { requestLogReplays } from '../db/schema'
import { log } from './logger'
import { metrics } from './metrics'
import { arrayLiteral } from './array-literal'

/** A replay counted rather than logged as a row (server/db/schema.ts, requestLogReplays). */
export interface CountedReplay {
  scope: string
  key: string
  tenantId: string | null
  method: string
  path: string
  status: number
  at: Date
}

export interface ReplayCounterOptions {
  instance: string
  /** How long a count waits for companions before the counts are written. */
  flushEveryMs: number
  /** Minutes (key, scope, minute) kept in memory at most; past it the oldest are forgotten. */
  maxEntries: number
  /** The clock (epoch ms); tests set it. */
  now?: () => number
}

export interface ReplayCounter {
  count: (db: Database, replay: CountedReplay) => void
  /** Writes what changed, retrying until written or `timeoutMs` passed; resolves to the minutes still unwritten. */
  flush: (timeoutMs: number) => Promise<number>
}

interface MinuteCount {
  replay: CountedReplay
  minute: Date
  replays: number
  firstAt: Date
  lastAt: Date
  /** Counted since last written. */
  dirty: boolean
}

const MINUTE_MS = 60_000
/** A failed write is tried again after this long: the counts wait in memory meanwhile. */
const RETRY_MS = 1000
/**
 * A written minute stays in memory this long after it ended: a counted replay took less than
 * SLOW_REQUEST_MS (1 s), so one that began before the minute's end may still be counted into it.
 */
const MINUTE_GRACE_MS = 2000

/**
 * The instance's running total per (key, scope, minute), written in one upsert per flush. Totals,
 * not increments: an upsert that committed but whose answer was lost is simply written again, and
 * the row keeps the larger total. A minute stays in memory until it has ended and its total is
 * written; past `maxEntries` the oldest minute is forgotten (its next replay starts a new total,
 * which the upsert cannot lower), counted in request_log_replays_forgotten_total.
 */
export function createReplayCounter(options: ReplayCounterOptions): ReplayCounter {
  const minutes = new Map<string, MinuteCount>()
  const now = options.now ?? Date.now
  let target: Database | undefined
  let timer: NodeJS.Timeout | undefined
  let writing: Promise<boolean> | undefined

  function schedule(delay: number): void {
    if (timer || writing) return
    timer = setTimeout(() => {
      timer = undefined
      void write()
    }, delay).unref()
  }

  /** Writes every changed total; true when nothing is left to write. */
  function write(): Promise<boolean> {
    writing ??= (async () => {
      const changed = [...minutes.values()].filter(entry => entry.dirty)
      if (!target || !changed.length) return true
      for (const entry of changed) entry.dirty = false
      try {
        await target.execute(upsert(options.instance, changed))
      }
      catch (error) {
        for (const entry of changed) entry.dirty = true
        log.warn('replay counts not written yet; retrying', { minutes: changed.length, retryInMs: RETRY_MS, error })
        return false
      }
      const ended = now() - MINUTE_GRACE_MS - MINUTE_MS
      for (const [name, entry] of minutes) if (!entry.dirty && entry.minute.getTime() <= ended) minutes.delete(name)
      return true
    })().finally(() => {
      writing = undefined
    })
    return writing.then((done) => {
      if ([...minutes.values()].some(entry => entry.dirty)) schedule(done ? options.flushEveryMs : RETRY_MS)
      return done
    })
  }

  return {
    count(db, replay) {
      target = db
      const minute = new Date(Math.floor(replay.at.getTime() / MINUTE_MS) * MINUTE_MS)
      const name = `${minute.getTime()}\n${replay.scope}\n${replay.key}`
      const entry = minutes.get(name)
      if (entry) {
        entry.replays++
        if (replay.at > entry.lastAt) entry.lastAt = replay.at
        entry.dirty = true
      }
      else {
        if (minutes.size >= options.maxEntries) {
          const [oldest] = minutes.keys()
          minutes.delete(oldest!)
          metrics.replayCountsForgotten.inc()
        }
        minutes.set(name, { replay, minute, replays: 1, firstAt: replay.at, lastAt: replay.at, dirty: true })
      }
      schedule(options.flushEveryMs)
    },
    async flush(timeoutMs) {
      clearTimeout(timer)
      timer = undefined
      const deadline = performance.now() + timeoutMs
      while (!await write() && performance.now() + RETRY_MS < deadline) await new Promise(resolve => setTimeout(resolve, RETRY_MS))
      return [...minutes.values()].filter(entry => entry.dirty).length
    },
  }
}

const columns = ['idempotency_key', 'scope', 'minute', 'instance', 'tenant_id', 'method', 'path', 'status', 'replays', 'first_at', 'last_at'] as const
const types = ['text', 'text', 'timestamptz', 'text', 'text', 'text', 'text', 'int', 'int', 'timestamptz', 'timestamptz'] as const

/** One statement for every changed minute: each column one array parameter, as the request log's batches. */
function upsert(instance: string, entries: MinuteCount[]) {
  const values: Array<Array<string | number | null>> = [
    entries.map(entry => entry.replay.key),
    entries.map(entry => entry.replay.scope),
    entries.map(entry => entry.minute.toISOString()),
    entries.map(() => instance),
    entries.map(entry => entry.replay.tenantId),
    entries.map(entry => entry.replay.method),
    entries.map(entry => entry.replay.path),
    entries.map(entry => entry.replay.status),
    entries.map(entry => entry.replays),
    entries.map(entry => entry.firstAt.toISOString()),
    entries.map(entry => entry.lastAt.toISOString()),
  ]
  const names = sql.raw(columns.join(', '))
  const arrays = sql.join(values.map((column, index) => sql`${arrayLiteral(column)}::${sql.raw(types[index]!)}[]`), sql`, `)
  return sql`insert into ${requestLogReplays} (${names}) select * from unnest(${arrays}) as counted(${names})
    on conflict (idempotency_key, scope, minute, instance) do update set
      replays = greatest(${requestLogReplays}.replays, excluded.replays),
      last_at = greatest(${requestLogReplays}.last_at, excluded.last_at)`
}
