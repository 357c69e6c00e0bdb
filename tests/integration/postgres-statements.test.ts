import { eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type Database, type DatabaseHandle, openDatabase, transaction, writeAtCommit } from '@idempotent-checkout/db-kit'
import { startTurnsProxy } from '../../bench/pg-turns-proxy.mjs'
import { orders } from '../../server/db/schema'
import { throughPooler } from '../support/postgres-topology'
import { createTestDatabase, describeWithServices } from '../support/services'
import { testMigrations } from '../support/migrations'

/**
 * How drizzle's queries reach Postgres. Unnamed, a query with parameters costs postgres.js two
 * round trips (its parameter types first) and Postgres a parse and a plan every time; in session
 * mode they are prepared instead. Behind a transaction pooler nothing named may outlive a transaction.
 */

const preparedTexts = async (handle: DatabaseHandle) =>
  (await handle.db.execute(sql`select statement from pg_prepared_statements`) as unknown as Array<{ statement: string }>).map(row => row.statement)

describeWithServices('drizzle\'s queries on postgres.js', ['postgres'], () => {
  let database: { url: string, drop: () => Promise<void> }
  let proxy: Awaited<ReturnType<typeof startTurnsProxy>>
  const opened: DatabaseHandle[] = []
  // One connection: the count of round trips and the prepared statements are that connection's.
  const open = async (poolMode: 'session' | 'transaction', pipelining = false) => {
    const handle = await openDatabase({ url: throughPooler(database.url, `postgres://127.0.0.1:${proxy.port}`), poolMode, pgliteDir: '', migrations: testMigrations, poolSize: 1, pipelining })
    opened.push(handle)
    return handle
  }
  const lookUp = (handle: DatabaseHandle | Database, id: string) => ('db' in handle ? handle.db : handle).select({ id: orders.id }).from(orders).where(eq(orders.id, id))

  beforeAll(async () => {
    database = await createTestDatabase('statements')
    proxy = await startTurnsProxy({ host: '127.0.0.1', port: Number(new URL(database.url).port || 5432) })
  })

  afterAll(async () => {
    await Promise.allSettled(opened.map(handle => handle.close()))
    await proxy?.close()
    await database?.drop()
  })

  it('session mode: a query with parameters is prepared once per connection, then one round trip each, in a transaction too', async () => {
    const handle = await open('session')
    await lookUp(handle, 'ord_first')
    const before = proxy.turns()
    for (let index = 0; index < 10; index++) expect(await lookUp(handle, `ord_${index}`)).toEqual([])
    expect(proxy.turns() - before).toBe(10)
    await transaction(handle.db, async (tx) => {
      await tx.update(orders).set({ updatedAt: sql`now()` }).where(eq(orders.id, 'ord_in_transaction'))
    })
    const texts = await preparedTexts(handle)
    expect(texts).toContain('select "id" from "orders" where "orders"."id" = $1')
    expect(texts).toContain('update "orders" set "updated_at" = now() where "orders"."id" = $1')
  })

  it('pipelined, a transaction costs its statements\' round trips only: BEGIN leaves with the first, COMMIT with the writes deferred to it; postgres.js\' begin costs two more', async () => {
    // Behind a pooler drizzle's statements are unnamed: two round trips each (their parameters' types
    // first), but for the deferred write when pipelined, which is written with its values in the text;
    // postgres.js' begin there also sets the timeouts in a round trip of its own.
    for (const [poolMode, pipelining, roundTrips] of [['session', true, 2], ['transaction', true, 3], ['session', false, 4], ['transaction', false, 7]] as const) {
      const handle = await open(poolMode, pipelining)
      const readThenWrite = () => transaction(handle.db, async (tx) => {
        await lookUp(tx, 'ord_read_in_transaction')
        writeAtCommit(tx, tx.update(orders).set({ updatedAt: sql`now()` }).where(eq(orders.id, 'ord_written_at_commit')))
      })
      // Once to prepare its statements (session mode), then counted.
      await readThenWrite()
      const before = proxy.turns()
      await readThenWrite()
      expect(proxy.turns() - before, `${poolMode}, pipelining ${pipelining}`).toBe(roundTrips)
    }
  })

  it('transaction mode: the same query stays unnamed, and nothing is left prepared on the server connection', async () => {
    const handle = await open('transaction')
    for (let index = 0; index < 3; index++) expect(await lookUp(handle, `ord_${index}`)).toEqual([])
    expect(await preparedTexts(handle)).toEqual([])
  })
})
