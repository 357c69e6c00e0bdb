import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import * as schema from './schema'

export type Database = PgDatabase<PgQueryResultHKT, typeof schema>

export interface DatabaseHandle {
  db: Database
  driver: 'postgres' | 'pglite'
  /** Round trip to the server: readiness checks. */
  ping(): Promise<void>
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

export interface OpenDatabaseOptions {
  /** postgres:// URL; without one the embedded PGlite in `pgliteDir` is used. */
  url?: string
  pgliteDir: string
  migrationsDir: string
  poolSize?: number
}

/** Advisory lock key held while migrating. Any constant works: every instance must agree on it. */
export const MIGRATION_LOCK_ID = 4_207_731_001

/**
 * Connects and applies the committed migrations before anything else may use the database.
 * Several instances starting at once serialise on a Postgres advisory lock.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  const migrationsFolder = resolve(options.migrationsDir)
  return options.url
    ? openPostgres(options.url, migrationsFolder, options.poolSize ?? 10)
    : openPglite(resolve(options.pgliteDir), migrationsFolder)
}

async function openPostgres(url: string, migrationsFolder: string, poolSize: number): Promise<DatabaseHandle> {
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
    },
  })
  return {
    db: drizzlePostgres(client, { schema }) as unknown as Database,
    driver: 'postgres',
    ping: async () => { await client`select 1` },
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
  const client = await PGlite.create(dataDir)
  const db = drizzle(client, { schema })
  await migrate(db, { migrationsFolder })
  return {
    db: db as unknown as Database,
    driver: 'pglite',
    ping: async () => { await client.query('select 1') },
    close: () => client.close(),
  }
}
