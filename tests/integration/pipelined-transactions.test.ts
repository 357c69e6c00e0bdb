import { inArray, sql } from 'drizzle-orm'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type Database, transaction } from '@idempotent-checkout/db-kit'
import { rowsOf } from '../../server/db/raw-rows'
import { tenants } from '../../server/db/schema'
import { openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { describeWithServices, postgresAdminUrl } from '../support/services'

/**
 * A pipelined transaction (db-kit `pipelining`, as the app runs) holds one reserved connection. When
 * that connection dies mid-transaction and the pool reconnects it for a transaction that was waiting,
 * the first one's later statements and its COMMIT must fail, not run in the second one's session:
 * there they would join the second transaction and commit it early, and the first would resolve as
 * if its own work had committed (the driver fix in patches/postgres+3.4.9.patch, upstream 0004).
 */
describeWithServices('a pipelined transaction whose connection died', ['postgres'], () => {
  let database: SuiteDatabase
  let db: Database
  let admin: postgres.Sql

  beforeAll(async () => {
    // One connection: the waiting transaction gets the dead one's reconnect.
    database = await openSuiteDatabase('postgres', 'pipelined-closed', { poolSize: 1, pipelining: true })
    db = database.handle.db
    admin = postgres(postgresAdminUrl, { max: 1, onnotice: () => {} })
  }, 60_000)
  afterAll(async () => {
    await admin?.end()
    await database?.close()
  })

  it('sends nothing more on the reconnect: it rejects with CONNECTION_CLOSED, and the transaction that got the connection commits or rolls back on its own', async () => {
    const ids = { lost: 'ten_pipe_lost', late: 'ten_pipe_late', other: 'ten_pipe_other' }
    let otherWrote!: () => void
    const otherHasWritten = new Promise<void>((resolve) => { otherWrote = resolve })
    let finishOther!: () => void
    const otherMayFinish = new Promise<void>((resolve) => { finishOther = resolve })
    let other: Promise<unknown> | undefined

    const first = transaction(db, async (tx) => {
      await tx.insert(tenants).values({ id: ids.lost, name: 'lost with its connection' })
      const [{ pid }] = rowsOf<{ pid: number }>(await tx.execute(sql`select pg_backend_pid() as pid`)) as [{ pid: number }]
      // Waits for the one connection; it rolls back on purpose once the late statement was tried.
      other = transaction(db, async (tx2) => {
        await tx2.insert(tenants).values({ id: ids.other, name: 'the waiting transaction' })
        otherWrote()
        await otherMayFinish
        throw new Error('rolled back on purpose')
      }).catch((error: Error) => error.message)
      await admin`select pg_terminate_backend(${pid})`
      await otherHasWritten
      await tx.insert(tenants).values({ id: ids.late, name: 'sent after the connection died' })
    })
      // drizzle wraps the driver's error: its code is on the cause.
      .then(() => 'committed', (error: { code?: string, cause?: { code?: string } }) => error.cause?.code ?? error.code ?? String(error))

    const outcome = await first
    finishOther()
    expect(outcome).toBe('CONNECTION_CLOSED')
    expect(await other).toBe('rolled back on purpose')
    const kept = await db.select({ id: tenants.id }).from(tenants).where(inArray(tenants.id, Object.values(ids)))
    expect(kept).toEqual([])
  })
})
