import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { readMigrationFiles } from 'drizzle-orm/migrator'
import type postgres from 'postgres'
import { coalescingSocketFactory } from './coalesced-socket'
import { TransactionPoolerError } from './errors'
import { holdPgliteDir } from './pglite-lock'
import { type PoolMode, postgresConnection } from './postgres-options'
import { withLiterals } from './literals'
import { shiftParams } from './statements'
import { type CommitPipeline, openingWith } from './pipeline'
import { queryInTransaction, registerDatabase, runAfterCommit } from './transaction'
import type { BoundStatement, Database, DatabaseHandle, DeferrableQuery } from './types'

export type { Database, DatabaseHandle }

export interface OpenDatabaseOptions {
  /** postgres:// URL; without one the embedded PGlite in `pgliteDir` is used. */
  url?: string
  /** How `url` is reached: directly or through a session pooler (default), or a transaction pooler. */
  poolMode?: PoolMode
  /** A direct connection (not through the pooler) for migrations and LISTEN; optional. */
  directUrl?: string
  /** PEM file of the CA the server's certificate is verified against (sslmode=verify-ca/verify-full). */
  caFile?: string
  pgliteDir: string
  /**
   * Applied in order at start-up, each folder (drizzle-kit's journal and SQL) with its own journal
   * table in the `drizzle` schema, so an app's migrations and this module's live side by side.
   */
  migrations: MigrationSource[]
  /** drizzle's schema, for relational queries (`db.query.*`); optional. */
  schema?: Record<string, unknown>
  /** Shown in pg_stat_activity. */
  applicationName?: string
  poolSize?: number
  /** Postgres lock_timeout of the pool's connections (default LOCK_TIMEOUT_MS). */
  lockTimeoutMs?: number
  /**
   * postgres.js only, off by default: transactions on a reserved connection with BEGIN sent with
   * their first statements and COMMIT with the writes deferred to it (writeAtCommit), and a tick's
   * socket writes sent as one. Needs a postgres.js whose reserved connections fail their queries
   * when they close (porsager/postgres#1195, #1199) and never send them on the connection's
   * reconnect (README, "Transactions in fewer round trips"): stock 3.4.x can leave a request
   * waiting for ever after a pooler restart, or run a transaction's late statements outside it.
   */
  pipelining?: boolean
}

/**
 * No statement waits on another transaction's lock for longer: an idempotent request that waits on
 * a duplicate's uncommitted record (Redis gone) answers 409 instead of hanging (55P03 lock_not_available).
 */
export const LOCK_TIMEOUT_MS = 5000

/** A frozen owner must not hold an idempotency row lock forever: Postgres ends its transaction. */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000

/** Advisory lock key held while migrating. Any constant works: every instance must agree on it. */
export const MIGRATION_LOCK_ID = 4_207_731_001

/** A folder of drizzle-kit migrations and the table that records which of them were applied. */
export interface MigrationSource {
  folder: string
  /** drizzle's own default, `__drizzle_migrations`, for an app's migrations. */
  table: string
}

/**
 * Connects and applies the committed migrations before anything else may use the database.
 * Several instances starting at once serialise on a Postgres advisory lock.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  const migrations = options.migrations.map(source => ({ ...source, folder: resolve(source.folder) }))
  const handle = options.url
    ? await openPostgres({ ...options, url: options.url, migrations })
    : await openPglite(resolve(options.pgliteDir), migrations, options.schema)
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

interface PostgresOpening extends OpenDatabaseOptions {
  url: string
}

async function openPostgres(options: PostgresOpening): Promise<DatabaseHandle> {
  // Loaded on demand, like PGlite: an app on the embedded database needs no postgres.js installed.
  const [{ default: postgres }, { drizzle: drizzlePostgres }] = await Promise.all([import('postgres').catch(missingDriver('postgres@3', 'a database URL')), import('drizzle-orm/postgres-js')])
  const poolMode = options.poolMode ?? 'session'
  const lockTimeoutMs = options.lockTimeoutMs ?? LOCK_TIMEOUT_MS
  const pooled = poolMode === 'transaction'
  const main = postgresConnection(options.url, options.caFile)
  const direct = options.directUrl ? postgresConnection(options.directUrl, options.caFile) : undefined
  const migrationConnection = postgres((direct ?? main).url, { ...(direct ?? main).options, max: 1, prepare: false, onnotice: () => {}, connect_timeout: 10 })
  try {
    await migrateInOneTransaction(migrationConnection, options.migrations)
  }
  finally {
    await migrationConnection.end()
  }
  const client = postgres(main.url, {
    ...main.options,
    // One socket write per tick (./coalesced-socket.ts), where postgres.js would make one per KiB.
    // (postgres.js takes a socket factory; its types do not declare it.)
    ...(options.pipelining ? { socket: coalescingSocketFactory(main.url, main.options.ssl) } as object : {}),
    max: options.poolSize ?? 10,
    onnotice: () => {},
    // Behind a transaction pooler the next statement may reach another server connection, where a
    // statement prepared on this one does not exist (26000) or describes other rows.
    prepare: !pooled,
    // Fail fast when Postgres is gone: the API answers 503 instead of hanging for 30 s.
    connect_timeout: 3,
    // Reconnect within a second, however many attempts failed. postgres.js' default backoff grows
    // with the failures of the whole pool up to 20 s, and a query handed to a connection waiting
    // out that delay waits with it: after a 5 s outage, requests hung for 10–15 s.
    backoff: (failures: number) => Math.min(0.05 * 2 ** failures, 1),
    // A pooler refuses startup parameters but its own few: there every transaction sets the timeouts.
    connection: {
      application_name: options.applicationName ?? 'nuxt-idempotency',
      ...(pooled ? {} : { idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS, lock_timeout: lockTimeoutMs }),
    },
  })
  const mode = pooled ? pooledMode(lockTimeoutMs) : sessionMode
  if (mode.prepare) preparedQueries(client)
  if (options.pipelining) pipelinedTransactions(client, mode)
  else stockTransactions(client, mode)
  driverModes.set(client, mode)
  await checkReachable(client, poolMode)
  // LISTEN lasts as long as its session: through a transaction pooler only on a direct connection.
  const listener = pooled ? (direct && postgres(direct.url, { ...direct.options, max: 1, prepare: false, onnotice: () => {} })) : client
  return {
    db: drizzlePostgres(client, { schema: options.schema }) as unknown as Database,
    driver: 'postgres',
    poolMode,
    ping: async () => { await client`select 1` },
    transact: async (statements, options = {}) => {
      const statement = asOneStatement(statements)
      if (!options.beforeCommit) {
        await sendOne(client as unknown as PostgresJsClient, mode, statement)
        return
      }
      const connection = await client.reserve()
      try {
        await connection.unsafe(mode.heldTimeouts ? `begin; ${mode.heldTimeouts}` : 'begin')
        try {
          await send(connection, mode, statement)
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
    notifications: listener
      ? {
          listen: async (channel, onNotify) => {
            const subscription = await listener.listen(channel, () => onNotify())
            return () => subscription.unlisten()
          },
          // A NOTIFY is an ordinary statement: the pooler carries it.
          notify: async (channel) => { await client.notify(channel, '') },
        }
      : undefined,
    close: async () => {
      await Promise.all([client.end({ timeout: 5 }), listener && listener !== client ? listener.end({ timeout: 5 }) : undefined])
    },
  }
}

/**
 * drizzle's migrator (the same journal table, hashes and order), but in one transaction that first
 * takes a transaction-scoped advisory lock: instances starting at once apply each migration once,
 * and a transaction pooler keeps the lock and the migrations on one server connection (a
 * session-scoped lock would be taken on one and released on another).
 */
async function migrateInOneTransaction(sql: postgres.Sql, sources: MigrationSource[]): Promise<void> {
  await sql.begin(async (tx) => {
    await tx.unsafe('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID])
    await tx.unsafe('create schema if not exists drizzle')
    for (const source of sources) {
      const journal = `drizzle.${quoteIdentifier(source.table)}`
      await tx.unsafe(`create table if not exists ${journal} (id serial primary key, hash text not null, created_at bigint)`)
      const [last] = await tx.unsafe<Array<{ created_at: string }>>(`select created_at from ${journal} order by created_at desc limit 1`)
      for (const migration of readMigrationFiles({ migrationsFolder: source.folder })) {
        if (last && Number(last.created_at) >= migration.folderMillis) continue
        for (const statement of migration.sql) await tx.unsafe(statement)
        await tx.unsafe(`insert into ${journal} (hash, created_at) values ($1, $2)`, [migration.hash, migration.folderMillis])
      }
    }
  })
}

const quoteIdentifier = (name: string) => `"${name.replace(/"/g, '""')}"`

/**
 * The first query of the pool, so that a deployment pointed at a transaction pooler in session mode
 * learns it at start-up rather than from a readiness probe that never passes.
 */
async function checkReachable(client: postgres.Sql, poolMode: PoolMode): Promise<void> {
  try {
    await client`select 1`
  }
  catch (error) {
    if (poolMode === 'session' && /unsupported startup parameter/i.test(String((error as Error)?.message))) {
      await client.end({ timeout: 1 })
      throw new TransactionPoolerError(`The database URL refuses the connection's settings (${(error as Error).message}): it looks like a transaction pooler (PgBouncer, Supavisor, RDS Proxy), which needs pool mode \`transaction\`.`, { cause: error })
    }
    // Any other failure (Postgres restarting, say) is for the pool's reconnects to handle.
  }
}

/**
 * drizzle's transactions as postgres.js' begin runs them (BEGIN awaited, COMMIT alone): prepared
 * in session mode, and behind a pooler each sets the timeouts a session would have had.
 */
function stockTransactions(client: postgres.Sql, mode: DriverMode): void {
  const begin = client.begin.bind(client) as (...args: unknown[]) => Promise<unknown>
  ;(client as { begin: unknown }).begin = (...args: unknown[]) => {
    const work = args.pop() as (tx: postgres.TransactionSql) => unknown
    return begin(...args, async (tx: postgres.TransactionSql) => {
      if (mode.prepare) preparedQueries(tx)
      if (mode.heldTimeouts) await tx.unsafe(mode.heldTimeouts)
      return work(tx)
    })
  }
}

/**
 * drizzle's transactions (postgres.js begin) on a reserved connection, pipelined: BEGIN is not
 * awaited on its own but leaves in the same socket write as the transaction's first statements,
 * and COMMIT in the same write as the statements writeAtCommit() deferred. postgres.js' own begin
 * waits for BEGIN's answer (one round trip) and sends COMMIT alone (another). Behind a pooler the
 * opening also sets the timeouts a session would have had. A statement that failed while the work
 * went on (its error caught) aborted the transaction: its COMMIT answers ROLLBACK, and this throws.
 */
function pipelinedTransactions(client: postgres.Sql, mode: DriverMode): void {
  type Reserved = postgres.ReservedSql & { savepoint?: unknown }
  ;(client as { begin: unknown }).begin = async (...args: unknown[]) => {
    const work = args.pop() as (tx: Reserved) => unknown
    // drizzle passes no begin options (its transaction config is a SET TRANSACTION statement).
    if (args.length > 0) throw new Error('begin options are not supported here: set them with the first statement (SET TRANSACTION …)')
    const connection = await client.reserve() as Reserved
    if (mode.prepare) preparedQueries(connection)
    // Nested transactions would need savepoints, which this connection does not offer: none are used.
    connection.savepoint = () => Promise.reject(new Error('nested transactions (savepoints) are not supported by this database layer'))
    const pipeline: CommitPipeline = { atCommit: [], run: statement => send(connection, mode, statement) }
    // Sent with the work's first statements (postgres.js writes what is queued in one tick together).
    const opened = connection.unsafe(mode.heldTimeouts ? `begin; ${mode.heldTimeouts}` : 'begin').execute()
    const openingFailure = opened.then(() => undefined, (error: unknown) => ({ error }))
    try {
      let result: unknown
      try {
        result = await openingWith(pipeline, () => work(connection))
        const failed = await openingFailure
        if (failed) throw failed.error
      }
      catch (error) {
        await openingFailure
        await connection.unsafe('rollback').catch(() => {})
        throw error
      }
      const sent = [...pipeline.atCommit.map(query => send(connection, mode, compiled(query))), connection.unsafe('commit')]
      const settled = await Promise.allSettled(sent)
      // The first failure is the cause; COMMIT of an aborted transaction rolls it back.
      const failed = settled.find(outcome => outcome.status === 'rejected')
      if (failed) throw failed.reason
      const commit = (settled.at(-1) as PromiseFulfilledResult<{ command?: string }>).value
      if (commit.command !== 'COMMIT') throw new Error(`the transaction was rolled back (its COMMIT answered ${commit.command}): a statement in it failed and its error was caught`)
      return result
    }
    finally {
      connection.release()
    }
  }
}

/** A deferred query's text and values, to send it on the connection itself. */
function compiled(query: DeferrableQuery): BoundStatement {
  if ('text' in query) return query
  const { sql: text, params } = 'toSQL' in query ? query.toSQL() : query.getQuery()
  return { text, params }
}

/**
 * Outside a transaction pooler, drizzle's queries are prepared too. drizzle sends them unnamed,
 * and postgres.js sends an unnamed query with parameters in two round trips (its parameter types
 * first, then the values), which Postgres parses and plans each time. Prepared, a query costs one
 * round trip and is planned once per connection. Its texts are parameterised, so each connection
 * keeps one prepared statement per query shape (an `in (…)` list, one per length used). Applied to
 * the pool and to each connection a transaction reserves.
 */
function preparedQueries(sql: object): void {
  type Unsafe = (text: string, params?: unknown[] | Record<string, unknown>, options?: Record<string, unknown>) => unknown
  const target = sql as { unsafe: Unsafe }
  const unsafe = target.unsafe.bind(sql)
  // unsafe(text, options) is postgres.js' other form.
  target.unsafe = (text, params, options) => (Array.isArray(params) || params === undefined
    ? unsafe(text, params ?? [], { ...options, prepare: true })
    : unsafe(text, [], { ...params, prepare: true }))
}

async function openPglite(dataDir: string, migrations: MigrationSource[], schema?: Record<string, unknown>): Promise<DatabaseHandle> {
  // Loaded on demand: PGlite is large and production deployments never need it.
  const [{ PGlite }, { drizzle }, { migrate }] = await Promise.all([
    import('@electric-sql/pglite').catch(missingDriver('@electric-sql/pglite', 'the embedded database (no database URL)')),
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
  for (const source of migrations) await migrate(db, { migrationsFolder: source.folder, migrationsTable: source.table })
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

/** A driver that is not installed: the install command, instead of a module resolution error. */
function missingDriver(name: string, neededFor: string) {
  return (error: unknown): never => {
    throw new Error(`${neededFor} needs ${name.replace(/@\d+$/, '')}: run \`npm install ${name}\`.`, { cause: error })
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
  unsafe: (text: string, params?: never[], options?: { prepare: boolean }) => Promise<Rows>
  reserve: () => Promise<PostgresJsClient & { release: () => void }>
}
interface PgliteClient {
  query: <Row>(text: string, params: unknown[]) => Promise<{ rows: Row[] }>
  transaction: <T>(work: (tx: Pick<PgliteClient, 'query'>) => Promise<T>) => Promise<T>
}
type DriverClient = PostgresJsClient | PgliteClient
const driverClient = (db: Database) => (db as unknown as { $client: DriverClient }).$client

/**
 * How a postgres.js pool sends: prepared or not, and what opens a pipelined transaction (BEGIN, and
 * lock_timeout behind a pooler). Behind a pooler the statements go unprepared with their values
 * written into the text (./literals.ts): postgres.js sends an unprepared statement that has
 * parameters in two round trips (it asks the server for their types first), a text without any in one.
 */
interface DriverMode {
  prepare: boolean
  opening: string
  /**
   * Behind a pooler, what a transaction held open across the app's awaits sets besides
   * lock_timeout; a pipelined one (statements and COMMIT in one write) never waits on the app.
   */
  heldTimeouts?: string
}
const driverModes = new WeakMap<object, DriverMode>()

/** One statement on a connection as the mode sends it: prepared with parameters, or (behind a pooler) one unprepared text. */
const send = (connection: Pick<PostgresJsClient, 'unsafe'>, mode: DriverMode, statement: BoundStatement) => (mode.prepare
  ? connection.unsafe(statement.text, statement.params as never[], { prepare: true })
  : connection.unsafe(withLiterals(statement), [], { prepare: false }))
const sessionMode: DriverMode = { prepare: true, opening: 'begin' }

function pooledMode(lockTimeoutMs: number): DriverMode {
  const lockTimeout = `set local lock_timeout = ${lockTimeoutMs}`
  return {
    prepare: false,
    opening: `begin; ${lockTimeout}`,
    heldTimeouts: `${lockTimeout}; set local idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
  }
}

/**
 * One statement (a transaction of its own) on the database's driver, prepared on postgres.js, where
 * drizzle sends every query unprepared (`execute <unnamed>`): for hot paths. Behind a transaction
 * pooler it is unprepared and wrapped in a transaction that sets the timeouts (one round trip still).
 * On a transaction (`tx` of transaction()) it is one of the transaction's statements. Rows come as
 * the driver gives them, by column name: decode them with `mapRow`.
 */
export async function queryPrepared(db: Database, statement: BoundStatement): Promise<Rows> {
  // A transaction has no driver client of its own.
  if (!('$client' in db)) return queryInTransaction(db, statement)
  const client = driverClient(db)
  if (!('unsafe' in client)) return (await client.query<Record<string, unknown>>(statement.text, statement.params)).rows
  return sendOne(client, driverModes.get(client) ?? sessionMode, statement)
}

/** One statement as its own transaction: prepared, or (behind a pooler) pipelined with its opening and COMMIT. */
async function sendOne(client: PostgresJsClient, mode: DriverMode, statement: BoundStatement): Promise<Rows> {
  if (mode.prepare) return client.unsafe(statement.text, statement.params as never[], { prepare: true })
  const [rows] = await inTransaction(client, mode, [statement])
  return rows!
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
  return inTransaction(client, driverModes.get(client) ?? sessionMode, statements)
}

/** The opening (BEGIN…), the statements and COMMIT pipelined on one connection: one round trip. */
async function inTransaction(client: PostgresJsClient, mode: DriverMode, statements: BoundStatement[]): Promise<Rows[]> {
  const connection = await client.reserve()
  try {
    const sent = [
      connection.unsafe(mode.opening),
      ...statements.map(statement => send(connection, mode, statement)),
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
