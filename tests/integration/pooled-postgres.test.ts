import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type DatabaseHandle, IDLE_IN_TRANSACTION_TIMEOUT_MS, LOCK_TIMEOUT_MS, openDatabase, queryAllPrepared, queryPrepared, TransactionPoolerError } from '@idempotent-checkout/db-kit'
import { inAppSettings } from '../../server/db'
import { startTurnsProxy } from '../../bench/pg-turns-proxy.mjs'
import { startPostgresServer, type TestPostgresServer } from '../support/chaos/postgres-server'
import { type Pgbouncer, startPgbouncer } from '../support/pgbouncer.mjs'
import { throughPooler } from '../support/postgres-topology'
import { createTestDatabase, describeWithServices, postgresAdminUrl } from '../support/services'
import { testMigrations } from '../support/migrations'

/**
 * The driver behind PgBouncer in transaction mode with its usual settings (a pooler of the test's
 * own, in front of the test server), as a deployment on Supabase's, Neon's or RDS Proxy's pooled
 * URL reaches Postgres.
 */

const setting = (name: string) => ({ text: `select current_setting('${name}') as value`, params: [] })

describeWithServices('Postgres behind a transaction pooler', ['postgres'], () => {
  let pooler: Pgbouncer
  let database: { url: string, drop: () => Promise<void> }
  let pooledUrl: string
  const opened: DatabaseHandle[] = []

  const open = async (options: { poolMode?: 'session' | 'transaction', directUrl?: string, pipelining?: boolean } = {}) => {
    const handle = await openDatabase({ url: pooledUrl, poolMode: options.poolMode ?? 'transaction', directUrl: options.directUrl, pgliteDir: '', migrations: testMigrations, poolSize: 4, pipelining: options.pipelining })
    opened.push(handle)
    return handle
  }

  beforeAll(async () => {
    pooler = await startPgbouncer({ serverUrl: postgresAdminUrl, defaultPoolSize: 3 })
    database = await createTestDatabase('pooled')
    pooledUrl = throughPooler(database.url, `postgres://127.0.0.1:${pooler.port}`)
  })

  afterAll(async () => {
    await Promise.allSettled(opened.map(handle => handle.close()))
    await database?.drop()
    await pooler?.destroy()
  })

  it('session mode through the pooler stops at start-up with a TransactionPoolerError, which the app words with its settings', async () => {
    const refusal = await open({ poolMode: 'session' }).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(TransactionPoolerError)
    expect((refusal as Error).message).toMatch(/unsupported startup parameter.*pool mode `transaction`/s)
    expect((refusal as Error).message).not.toMatch(/DATABASE_/)
    expect(() => inAppSettings(refusal)).toThrow(/^DATABASE_URL: .*unsupported startup parameter.* Set DATABASE_POOL_MODE=transaction, and DATABASE_DIRECT_URL to a direct connection/s)
  })

  it('four instances migrating at once through the pooler apply each migration once', async () => {
    const handles = await Promise.all(Array.from({ length: 4 }, () => open()))
    const sql = postgres(database.url, { max: 1, onnotice: () => {} })
    try {
      const rows = await sql`select hash, count(*)::int as copies from drizzle.__drizzle_migrations group by hash`
      const journal = (await import('../../drizzle/meta/_journal.json', { with: { type: 'json' } })).default
      expect(rows).toHaveLength(journal.entries.length)
      expect(rows.every(row => row.copies === 1)).toBe(true)
    }
    finally {
      await sql.end()
    }
    expect(handles.map(handle => handle.poolMode)).toEqual(['transaction', 'transaction', 'transaction', 'transaction'])
  })

  it('every transaction sets lock_timeout; one that stays open across the app\'s awaits (drizzle\'s) idle_in_transaction_session_timeout too', async () => {
    const handle = await open()
    const lockTimeout = `${LOCK_TIMEOUT_MS / 1000}s`
    // Pipelined: the statements and COMMIT leave in one write, so the transaction never idles on the app.
    const [lock, idle] = await queryAllPrepared(handle.db, [setting('lock_timeout'), setting('idle_in_transaction_session_timeout')])
    expect([lock![0]!.value, idle![0]!.value]).toEqual([lockTimeout, '0'])
    const [single] = await queryPrepared(handle.db, setting('lock_timeout'))
    expect(single!.value).toBe(lockTimeout)
    const settingsInDrizzle = (db: typeof handle.db) => db.transaction(async tx => (await tx.execute(`select current_setting('lock_timeout') as lock, current_setting('idle_in_transaction_session_timeout') as idle`) as unknown as Array<{ lock: string, idle: string }>)[0]!)
    expect(await settingsInDrizzle(handle.db)).toEqual({ lock: lockTimeout, idle: `${IDLE_IN_TRANSACTION_TIMEOUT_MS / 60_000}min` })
    // Pipelined, the opening sets them in the same write as BEGIN.
    expect(await settingsInDrizzle((await open({ pipelining: true })).db)).toEqual({ lock: lockTimeout, idle: `${IDLE_IN_TRANSACTION_TIMEOUT_MS / 60_000}min` })
    // Nothing leaks into the server connection the pooler hands to the next client.
    const sql = postgres(pooledUrl, { max: 1, prepare: false, onnotice: () => {} })
    try {
      const rows = await sql.unsafe<Array<{ value: string }>>(`select current_setting('lock_timeout') as value`)
      expect(rows[0]!.value).toBe('0')
    }
    finally {
      await sql.end()
    }
  })

  it('many concurrent statements on few server connections: no named prepared statement is missed (26000) or misread', async () => {
    const handle = await open()
    const statements = Array.from({ length: 300 }, (_, index) => ({ text: `select $1::int as n, repeat('x', $1::int % 7) as pad`, params: [index] }))
    const rows = await Promise.all(statements.map((statement, index) => index % 3 === 0
      ? queryAllPrepared(handle.db, [statement, { text: 'select $1::text as s', params: [`s${index}`] }]).then(([first]) => first!)
      : queryPrepared(handle.db, statement)))
    expect(rows.map(([row]) => row!.n)).toEqual(statements.map((_, index) => index))
    await handle.transact([{ text: 'select $1::int', params: [1] }, { text: 'select $1::text', params: ['a'] }])
  })

  it('a statement, or a transaction of several, in transaction mode is one round trip: opening, timeouts, statements and COMMIT in one write', async () => {
    // Round trips counted between the driver and Postgres (no pooler: the count is the driver's).
    const proxy = await startTurnsProxy({ host: '127.0.0.1', port: Number(new URL(database.url).port || 5432) })
    try {
      const handle = await openDatabase({ url: throughPooler(database.url, `postgres://127.0.0.1:${proxy.port}`), poolMode: 'transaction', pgliteDir: '', migrations: testMigrations, poolSize: 1 })
      opened.push(handle)
      const statement = (index: number) => ({ text: 'select $1::int as n, $2::text as s', params: [index, `s${index}`] })
      await queryPrepared(handle.db, statement(0))
      const before = proxy.turns()
      for (let index = 1; index <= 10; index++) await queryPrepared(handle.db, statement(index))
      for (let index = 1; index <= 10; index++) await queryAllPrepared(handle.db, [statement(index), statement(-index)])
      for (let index = 1; index <= 10; index++) await handle.transact([statement(index), statement(-index)])
      expect(proxy.turns() - before).toBe(30)
    }
    finally {
      await proxy.close()
    }
  })

  it('without a direct URL there is no LISTEN (workers poll); with one, LISTEN on it hears a NOTIFY sent through the pooler', async () => {
    expect((await open()).notifications).toBeUndefined()
    const handle = await open({ directUrl: database.url })
    let heard = 0
    const unlisten = await handle.notifications!.listen('pooled_test', () => { heard++ })
    try {
      await handle.notifications!.notify('pooled_test')
      await expect.poll(() => heard, { timeout: 5_000 }).toBe(1)
    }
    finally {
      await unlisten()
    }
  })
})

describeWithServices('the driver behind a transaction pooler when Postgres or the pooler goes away', ['postgres'], () => {
  let server: TestPostgresServer
  let pooler: Pgbouncer
  let handle: DatabaseHandle

  beforeAll(async () => {
    server = await startPostgresServer('pooled_outage')
    pooler = await startPgbouncer({ serverUrl: server.url })
    handle = await openDatabase({ url: pooler.urlFor(server.url), poolMode: 'transaction', pgliteDir: '', migrations: testMigrations, poolSize: 6, pipelining: true })
  }, 60_000)

  afterAll(async () => {
    await handle?.close()
    await pooler?.destroy()
    await server?.destroy()
  })

  /**
   * Twelve callers loop over every kind of call (a statement, a pipelined transaction, drizzle's
   * transaction) while `outage` runs; each call must settle (fail or succeed), and the pool must
   * work again afterwards. PgBouncer answers a login itself and asks Postgres only at the first
   * query: a connection made during the outage fails there, which once went unhandled (the run
   * fails on an unhandled rejection), and queries queued on a reserved connection that closed once
   * waited for ever.
   */
  async function callersThrough(outage: () => Promise<void>): Promise<{ failed: number, succeeded: number }> {
    let stopping = false
    const counts = { failed: 0, succeeded: 0 }
    const caller = async (index: number) => {
      while (!stopping) {
        try {
          if (index % 3 === 0) await queryPrepared(handle.db, { text: 'select pg_sleep(0.005), $1::int', params: [index] })
          else if (index % 3 === 1) await queryAllPrepared(handle.db, [{ text: 'select $1::int', params: [index] }, { text: 'select pg_sleep(0.005)', params: [] }])
          else await handle.db.transaction(async (tx) => { await tx.execute('select pg_sleep(0.005)') })
          counts.succeeded++
        }
        catch {
          counts.failed++
          await new Promise(resolve => setTimeout(resolve, 20))
        }
      }
    }
    const callers = Array.from({ length: 12 }, (_, index) => caller(index))
    await new Promise(resolve => setTimeout(resolve, 500))
    await outage()
    await new Promise(resolve => setTimeout(resolve, 2_000))
    stopping = true
    // Settled, or hung: a caller stuck in a call that never settles keeps this from resolving.
    const settled = await Promise.race([Promise.all(callers).then(() => true), new Promise<boolean>(resolve => setTimeout(resolve, 15_000, false))])
    expect(settled).toBe(true)
    const [row] = await queryPrepared(handle.db, { text: 'select 1 as one', params: [] })
    expect(row!.one).toBe(1)
    return counts
  }

  it('Postgres crashes for 3 s behind the pooler: every call settles, nothing goes unhandled, the pool recovers', async () => {
    const counts = await callersThrough(async () => {
      await server.crash()
      await new Promise(resolve => setTimeout(resolve, 3_000))
      await server.start()
    })
    expect(counts.failed).toBeGreaterThan(0)
    expect(counts.succeeded).toBeGreaterThan(0)
  })

  it('the pooler is killed for 3 s: every call settles, the pool recovers', async () => {
    const counts = await callersThrough(async () => {
      await pooler.kill()
      await new Promise(resolve => setTimeout(resolve, 3_000))
      await pooler.start()
    })
    expect(counts.failed).toBeGreaterThan(0)
  })
})
