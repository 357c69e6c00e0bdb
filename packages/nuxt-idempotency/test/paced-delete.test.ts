import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type DatabaseHandle, deleteInPacedBatches, openDatabase, type PacedDeleteOptions } from '@idempotent-checkout/db-kit'
import { createIdempotencyStore, idempotencyMigrations, type IdempotencyStore } from '../src/runtime/core'
import { idempotencyRecords as records } from '../src/runtime/core/schema'
import { describeWithServices, testDatabase } from './support/services'

/**
 * A clock that moves only when the run sleeps or a batch takes time: every pause and every duration
 * is exact, whatever the machine's speed.
 */
function fakeClock() {
  const clock = {
    ms: 0,
    pauses: [] as number[],
    now: () => clock.ms,
    sleep: async (ms: number) => {
      clock.pauses.push(ms)
      clock.ms += ms
    },
  }
  return clock
}

/** A table of `backlog` rows whose batches each take `batchMs` on the clock. */
function fakeTable(clock: ReturnType<typeof fakeClock>, backlog: number, batchMs: number) {
  let left = backlog
  return async (limit: number) => {
    clock.ms += batchMs
    const deleted = Math.min(limit, left)
    left -= deleted
    return deleted
  }
}

describe('deleteInPacedBatches', () => {
  it('deletes a backlog of many batches in one run, until a batch comes back short', async () => {
    const clock = fakeClock()
    const run = await deleteInPacedBatches({ rows: fakeTable(clock, 10_050, 4) }, { batchSize: 100, dutyCycle: 0.5, budgetMs: 60_000, now: clock.now, sleep: clock.sleep })
    expect(run).toEqual({ deleted: { rows: 10_050 }, batches: 101, pausedMs: 400, elapsedMs: 101 * 4 + 400, drained: true })
  })

  it('pauses after each batch but the last for its share of the batch\'s duration: the run takes at least their sum', async () => {
    const clock = fakeClock()
    // Duty cycle 0.2: a batch of 10 ms is followed by 40 ms of rest.
    const run = await deleteInPacedBatches({ rows: fakeTable(clock, 450, 10) }, { batchSize: 100, dutyCycle: 0.2, budgetMs: 60_000, now: clock.now, sleep: clock.sleep })
    expect(run).toEqual({ deleted: { rows: 450 }, batches: 5, pausedMs: 160, elapsedMs: 5 * 10 + 160, drained: true })
    expect(clock.pauses).toEqual([40, 40, 40, 40])
  })

  it('stops at its budget, with the backlog left to the next run', async () => {
    const clock = fakeClock()
    const options: PacedDeleteOptions = { batchSize: 100, dutyCycle: 0.5, budgetMs: 1_000, now: clock.now, sleep: clock.sleep }
    const table = fakeTable(clock, 100_000, 100)
    // Batch and pause take 200 ms: four fit, a fifth batch would end its pause at 1,000 ms.
    expect(await deleteInPacedBatches({ rows: table }, options)).toEqual({ deleted: { rows: 500 }, batches: 5, pausedMs: 400, elapsedMs: 900, drained: false })
    expect(await deleteInPacedBatches({ rows: table }, options)).toEqual({ deleted: { rows: 500 }, batches: 5, pausedMs: 400, elapsedMs: 900, drained: false })
  })

  it('gives the tables a batch each in turn, so that one table\'s backlog does not take another\'s budget', async () => {
    const clock = fakeClock()
    const batches: string[] = []
    const run = await deleteInPacedBatches({ big: fakeTable(clock, 1_000_000, 10), small: fakeTable(clock, 250, 10) }, {
      batchSize: 100, dutyCycle: 1, budgetMs: 70, now: clock.now, sleep: clock.sleep,
      onBatch: (table, deleted) => batches.push(`${table}:${deleted}`),
    })
    expect(batches).toEqual(['big:100', 'small:100', 'big:100', 'small:100', 'big:100', 'small:50', 'big:100'])
    expect(run).toEqual({ deleted: { big: 400, small: 250 }, batches: 7, pausedMs: 0, elapsedMs: 70, drained: false })
    expect(clock.pauses).toEqual([])
  })

  it('refuses a pace that would not end or not rest', async () => {
    const rows = async () => 0
    await expect(deleteInPacedBatches({ rows }, { batchSize: 0, dutyCycle: 0.5, budgetMs: 1000 })).rejects.toThrow(RangeError)
    await expect(deleteInPacedBatches({ rows }, { batchSize: 10, dutyCycle: 0, budgetMs: 1000 })).rejects.toThrow(RangeError)
    await expect(deleteInPacedBatches({ rows }, { batchSize: 10, dutyCycle: 1.5, budgetMs: 1000 })).rejects.toThrow(RangeError)
    await expect(deleteInPacedBatches({ rows }, { batchSize: 10, dutyCycle: 0.5, budgetMs: 0 })).rejects.toThrow(RangeError)
  })
})

/** The store's deleteExpired run by the paced loop, on both databases the module runs on. */
function retentionContract(driver: 'postgres' | 'pglite') {
  let handle: DatabaseHandle
  let store: IdempotencyStore
  let cleanup: () => Promise<void>

  beforeAll(async () => {
    if (driver === 'postgres') {
      const database = testDatabase('paced_delete')
      await database.create()
      handle = await openDatabase({ url: database.url, pgliteDir: '', migrations: [idempotencyMigrations()] })
      cleanup = database.drop
    }
    else {
      const dir = await mkdtemp(join(process.env.APP_BUILD_ROOT ?? tmpdir(), 'nuxt-idempotency-paced-delete-'))
      handle = await openDatabase({ pgliteDir: dir, migrations: [idempotencyMigrations()] })
      cleanup = () => rm(dir, { recursive: true, force: true })
    }
    store = createIdempotencyStore(handle.db)
  }, 60_000)

  afterAll(async () => {
    await handle?.close()
    await cleanup?.()
  })

  beforeEach(async () => {
    await handle.db.delete(records)
  })

  /** `count` records: expired an hour ago or expiring in an hour, with no lease, one that ran out, or a live one. */
  async function insertRecords(count: number, expired: boolean, lease: 'none' | 'ran-out' | 'live' = 'none'): Promise<string[]> {
    const ids: string[] = []
    for (let from = 0; from < count; from += 500) {
      const rows = await handle.db.insert(records).values(Array.from({ length: Math.min(500, count - from) }, () => ({
        scope: 'tenant:retention', key: randomUUID(), route: 'POST /api/orders', fingerprint: 'fingerprint', requestId: 'req_retention',
        status: lease === 'none' ? 'succeeded' as const : 'processing' as const,
        leaseToken: lease === 'none' ? null : randomUUID(),
        leaseExpiresAt: lease === 'none' ? null : lease === 'live' ? sql`now() + interval '1 minute'` : sql`now() - interval '1 minute'`,
        expiresAt: expired ? sql`now() - interval '1 hour'` : sql`now() + interval '1 hour'`,
      }))).returning({ id: records.id })
      ids.push(...rows.map(row => row.id))
    }
    return ids
  }

  const remainingIds = async () => (await handle.db.select({ id: records.id }).from(records)).map(row => row.id).sort()

  it('one run deletes a backlog of many batches, keeping unexpired records and those whose owner holds a live lease', async () => {
    await insertRecords(2_300, true)
    await insertRecords(50, true, 'ran-out')
    const kept = [...await insertRecords(3, true, 'live'), ...await insertRecords(4, false)]
    const pauses: number[] = []

    const run = await deleteInPacedBatches({ records: batch => store.deleteExpired(batch) }, {
      batchSize: 100, dutyCycle: 0.5, budgetMs: 600_000, sleep: async ms => void pauses.push(ms),
    })

    // 23 full batches and a last one of 50.
    expect(run).toMatchObject({ deleted: { records: 2_350 }, batches: 24, drained: true })
    expect(pauses).toHaveLength(23)
    expect(await remainingIds()).toEqual(kept.sort())
  })

  it('a run stopped by its budget leaves the rest to the next run', async () => {
    await insertRecords(1_000, true)
    // Every reading of the clock is a second later: a batch takes a second and the pause another.
    let readings = 0
    const pace: PacedDeleteOptions = { batchSize: 100, dutyCycle: 0.5, budgetMs: 5_000, now: () => 1000 * readings++, sleep: async () => {} }

    expect(await deleteInPacedBatches({ records: batch => store.deleteExpired(batch) }, pace)).toMatchObject({ deleted: { records: 200 }, batches: 2, drained: false })
    expect(await remainingIds()).toHaveLength(800)
    readings = 0
    expect(await deleteInPacedBatches({ records: batch => store.deleteExpired(batch) }, { ...pace, budgetMs: 600_000 })).toMatchObject({ deleted: { records: 800 }, drained: true })
    expect(await remainingIds()).toEqual([])
  })
}

describeWithServices('retention on Postgres', ['postgres'], () => retentionContract('postgres'))
describeWithServices('retention on PGlite', [], () => retentionContract('pglite'))
