import { existsSync, mkdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { holdPgliteDir } from './pglite-lock'
import * as schema from './schema'
import { type BoundStatement, shiftParams } from './statements'
import { registerDatabase, runAfterCommit } from './transaction'

export type Database = PgDatabase<PgQueryResultHKT, typeof schema>

export interface DatabaseHandle {
  db: Database
  driver: 'postgres' | 'pglite'
  /** Round trip to the server: readiness checks. */
  ping(): Promise<void>
  /**
   * Runs the statements as one transaction with one commit. On postgres.js they travel as one
   * statement (`with s0 as (…), s1 as (…) select 1`, prepared): one socket write, one round trip.
   * Rejects with the first failure, everything rolled back.
   */
  transact(statements: BoundStatement[], options?: TransactOptions): Promise<void>
  /**
   * Cross-process notifications (LISTEN/NOTIFY) on a dedicated connection that reconnects by itself;
   * absent on PGlite, which is one process (its workers poll).
   */
  notifications?: {
    listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>
    notify(channel: string): Promise<void>
  }
  close(): Promise<void>
}

export interface TransactOptions {
  /**
   * Runs after the statements, before COMMIT (an explicit transaction, test faults only); throwing
   * rolls back. On PGlite it runs before BEGIN, so that a delay does not hold the one connection.
   */
  beforeCommit?: () => Promise<void>
}

export interface OpenDatabaseOptions {
  /** postgres:// URL; without one the embedded PGlite in `pgliteDir` is used. */
  url?: string
  pgliteDir: string
  /** Default: the `drizzle/` folder next to the code (shipped in `.output/server/` by the build). */
  migrationsDir?: string
  poolSize?: number
  /** Postgres lock_timeout of the pool's connections (default LOCK_TIMEOUT_MS). */
  lockTimeoutMs?: number
}

/**
 * No statement waits on another transaction's lock for longer: an idempotent request that waits on
 * a duplicate's uncommitted record (Redis gone) answers 409 instead of hanging (55P03 lock_not_available).
 */
export const LOCK_TIMEOUT_MS = 5000

/** Advisory lock key held while migrating. Any constant works: every instance must agree on it. */
export const MIGRATION_LOCK_ID = 4_207_731_001

/**
 * Set on postgres.js by patches/postgres+3.4.9.patch, next to its fix of writes deferred past a lost
 * connection (unpatched, such a write throws from a timer and the process dies with Postgres).
 */
export const PATCHED_DRIVER_MARKER = Symbol.for('idempotent-checkout.postgres.deferred-write-fix')

export class UnpatchedDriverError extends Error {}

/**
 * Refuses a postgres.js without the project's patch: `npm ci --ignore-scripts` skips patch-package
 * (postinstall) silently, and the build then ships the unpatched driver.
 */
export function checkPatchedDriver(driver: unknown): void {
  if ((driver as { [PATCHED_DRIVER_MARKER]?: unknown } | undefined)?.[PATCHED_DRIVER_MARKER] === true) return
  throw new UnpatchedDriverError('postgres.js is missing the fix in patches/postgres+3.4.9.patch (without it a lost Postgres connection can crash the process). '
    + 'Did `npm ci` run with --ignore-scripts? Run `npx patch-package`, rebuild, and start again.')
}

/**
 * Connects and applies the committed migrations before anything else may use the database.
 * Several instances starting at once serialise on a Postgres advisory lock.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  const migrationsFolder = resolve(options.migrationsDir ?? shippedMigrationsDir())
  const handle = options.url
    ? await openPostgres(options.url, migrationsFolder, options.poolSize ?? 10, options.lockTimeoutMs ?? LOCK_TIMEOUT_MS)
    : await openPglite(resolve(options.pgliteDir), migrationsFolder)
  return registerDatabase(withStatementHooks(handle))
}

/** transact() runs the after-commit hooks its statements carry (e.g. a job insert's wake-up) once it committed. */
function withStatementHooks(handle: DatabaseHandle): DatabaseHandle {
  const send = handle.transact
  handle.transact = async (statements, options) => {
    await send(statements, options)
    const hooks = new Set(statements.flatMap(statement => (statement.afterCommit ? [statement.afterCommit] : [])))
    if (hooks.size) runAfterCommit(handle, hooks)
  }
  return handle
}

/**
 * The nearest `drizzle/` folder with a migration journal above this module: `.output/server/drizzle`
 * in a build (nuxt.config.ts copies it there), the project's own from the sources. Otherwise
 * `drizzle` under the working directory, whose absence the migrator reports.
 */
export function shippedMigrationsDir(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'drizzle', 'meta', '_journal.json'))) return join(dir, 'drizzle')
    if (dirname(dir) === dir) return resolve('drizzle')
  }
}

async function openPostgres(url: string, migrationsFolder: string, poolSize: number, lockTimeoutMs: number): Promise<DatabaseHandle> {
  checkPatchedDriver(postgres)
  const migrationConnection = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 })
  try {
    await migrationConnection`select pg_advisory_lock(${MIGRATION_LOCK_ID})`
    await migratePostgres(drizzlePostgres(migrationConnection), { migrationsFolder })
    await migrationConnection`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`
  }
  finally {
    await migrationConnection.end()
  }
  const client = postgres(url, {
    max: poolSize,
    onnotice: () => {},
    // Fail fast when Postgres is gone: the API answers 503 instead of hanging for 30 s.
    connect_timeout: 3,
    // Reconnect within a second, however many attempts failed. postgres.js' default backoff grows
    // with the failures of the whole pool up to 20 s, and a query handed to a connection waiting
    // out that delay waits with it: after a 5 s outage, requests hung for 10–15 s.
    backoff: (failures: number) => Math.min(0.05 * 2 ** failures, 1),
    connection: {
      application_name: 'idempotent-checkout',
      // A frozen owner must not hold an idempotency row lock forever: Postgres ends its transaction.
      idle_in_transaction_session_timeout: 60_000,
      lock_timeout: lockTimeoutMs,
    },
  })
  return {
    db: drizzlePostgres(client, { schema }) as unknown as Database,
    driver: 'postgres',
    ping: async () => { await client`select 1` },
    transact: async (statements, options = {}) => {
      const statement = asOneStatement(statements)
      if (!options.beforeCommit) {
        await client.unsafe(statement.text, statement.params as never[], { prepare: true })
        return
      }
      const connection = await client.reserve()
      try {
        await connection.unsafe('begin')
        try {
          await connection.unsafe(statement.text, statement.params as never[], { prepare: true })
          await options.beforeCommit()
        }
        catch (error) {
          await connection.unsafe('rollback').catch(() => {})
          throw error
        }
        await connection.unsafe('commit')
      }
      finally {
        connection.release()
      }
    },
    notifications: {
      listen: async (channel, onNotify) => {
        const subscription = await client.listen(channel, () => onNotify())
        return () => subscription.unlisten()
      },
      notify: async (channel) => { await client.notify(channel, '') },
    },
    close: () => client.end({ timeout: 5 }),
  }
}

async function openPglite(dataDir: string, migrationsFolder: string): Promise<DatabaseHandle> {
  // Loaded on demand: PGlite is large and production deployments never need it.
  const [{ PGlite }, { drizzle }, { migrate }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
    import('drizzle-orm/pglite/migrator'),
  ])
  mkdirSync(dataDir, { recursive: true })
  holdPgliteDir(dataDir)
  const client = await PGlite.create(dataDir)
  // PGlite is one connection: every query, in a transaction or not, waits in one first-come queue
  // until the running transaction ends. Transactions enter that queue one at a time, so a read waits
  // behind at most one transaction, however many writers are waiting.
  const transaction = client.transaction.bind(client)
  const oneTransactionAtATime = serialised()
  client.transaction = work => oneTransactionAtATime(() => transaction(work))
  const db = drizzle(client, { schema })
  await migrate(db, { migrationsFolder })
  return {
    db: db as unknown as Database,
    driver: 'pglite',
    // In-process: nothing to reach. A query would wait behind the running transaction.
    ping: async () => {
      if (client.closed) throw new Error('PGlite is closed')
    },
    // One connection, in-process: no round trips to save, so the statements simply run in turn.
    transact: async (statements, options = {}) => {
      // The test fault runs before BEGIN: a sleep inside the transaction would hold the one
      // connection and stall every other request. A throw still rolls the statements back.
      const fault = await options.beforeCommit?.().then(() => undefined, (error: unknown) => ({ error }))
      await client.transaction(async (tx) => {
        for (const statement of statements) await tx.query(statement.text, statement.params)
        if (fault) throw fault.error
      })
    },
    close: () => client.close(),
  }
}

/** Runs the calls one after another, in the order they were made, whatever each one's outcome. */
function serialised(): <T>(work: () => Promise<T>) => Promise<T> {
  let last: Promise<unknown> = Promise.resolve()
  return (work) => {
    const run = last.then(work)
    last = run.catch(() => {})
    return run
  }
}

type Rows = Array<Record<string, unknown>>
interface PostgresJsClient {
  unsafe: (text: string, params?: never[], options?: { prepare: true }) => Promise<Rows>
  reserve: () => Promise<PostgresJsClient & { release: () => void }>
}
interface PgliteClient {
  query: <Row>(text: string, params: unknown[]) => Promise<{ rows: Row[] }>
  transaction: <T>(work: (tx: Pick<PgliteClient, 'query'>) => Promise<T>) => Promise<T>
}
type DriverClient = PostgresJsClient | PgliteClient
const driverClient = (db: Database) => (db as unknown as { $client: DriverClient }).$client

/**
 * One statement (a transaction of its own) on the database's driver, prepared on postgres.js, where
 * drizzle sends every query unprepared (`execute <unnamed>`): for hot paths. Rows come as the driver
 * gives them, by column name: decode them with `mapRow`.
 */
export async function queryPrepared(db: Database, statement: BoundStatement): Promise<Rows> {
  const client = driverClient(db)
  if ('unsafe' in client) return client.unsafe(statement.text, statement.params as never[], { prepare: true })
  return (await client.query<Record<string, unknown>>(statement.text, statement.params)).rows
}

/**
 * Several statements in one transaction, one commit; each statement's rows. On postgres.js BEGIN,
 * the statements (prepared) and COMMIT are pipelined on one connection: one round trip. A failing
 * statement aborts the transaction (the rest fail, COMMIT rolls back) and its error is thrown.
 */
export async function queryAllPrepared(db: Database, statements: BoundStatement[]): Promise<Rows[]> {
  const client = driverClient(db)
  if (!('unsafe' in client)) {
    return client.transaction(async (tx) => {
      const results: Rows[] = []
      for (const statement of statements) results.push((await tx.query<Record<string, unknown>>(statement.text, statement.params)).rows)
      return results
    })
  }
  const connection = await client.reserve()
  try {
    const sent = [
      connection.unsafe('begin'),
      ...statements.map(statement => connection.unsafe(statement.text, statement.params as never[], { prepare: true })),
      connection.unsafe('commit'),
    ]
    const settled = await Promise.allSettled(sent)
    // The first failure is the cause; the statements after it only report the aborted transaction.
    const failed = settled.find(result => result.status === 'rejected')
    if (failed) throw failed.reason
    return settled.slice(1, -1).map(result => (result as PromiseFulfilledResult<Rows>).value)
  }
  finally {
    connection.release()
  }
}

const MAX_COMPOSED_TEXTS = 100
const composedTexts = new Map<string, string>()

/**
 * Several statements as one: each becomes a (data-modifying) CTE with its parameters renumbered
 * after the previous ones'. One statement is one transaction and one commit, and postgres.js sends
 * it in one write: the texts of a transaction sent as separate statements are split into several
 * socket writes (it flushes every 1 KiB). The texts come from defineStatement, where every value is
 * a parameter, so `$n` never appears inside a literal. A failure in any part fails the whole.
 */
function asOneStatement(statements: BoundStatement[]): BoundStatement {
  const key = statements.map(statement => statement.text).join('\0')
  let text = composedTexts.get(key)
  if (!text) {
    let offset = 0
    const parts = statements.map((statement, index) => {
      const shift = offset
      offset += statement.params.length
      return `s${index} as (${shiftParams(statement.text, shift)})`
    })
    // Postgres runs data-modifying CTEs that nothing reads last-listed first: listed in reverse, the
    // statements run in the order given (callers must still not depend on it for correctness).
    text = `with ${parts.reverse().join(', ')} select 1`
    if (composedTexts.size < MAX_COMPOSED_TEXTS) composedTexts.set(key, text)
  }
  return { text, params: statements.flatMap(statement => statement.params) }
}
