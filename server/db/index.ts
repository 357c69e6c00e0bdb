import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { type Database, type DatabaseHandle, openDatabase, type OpenDatabaseOptions, TransactionPoolerError } from '@idempotent-checkout/db-kit'
import { idempotencyMigrations } from 'nuxt-idempotency/core'
import { type AppConfig, useConfig } from '../config'
import * as schema from './schema'

export type { Database, DatabaseHandle }

let opening: Promise<DatabaseHandle> | undefined
let ready: DatabaseHandle | undefined

/** Opens the database and applies migrations once per process; every request awaits this first. */
export function databaseReady(): Promise<DatabaseHandle> {
  // Opened on the next turn of the event loop: the start-up plugin asks while the bundle is still
  // being loaded, and Nitro points import.meta.url at the server's entry (next to the migrations
  // the build ships, see shippedMigrationsDir) only once that is done.
  // The build ships the module's migrations next to the server (`nuxt dev`'s build too).
  opening ??= new Promise(resolve => setImmediate(resolve)).then(() => openAppDatabase(useConfig())).then(handle => (ready = handle))
  return opening
}

/** The database, once `databaseReady()` resolved (the request middleware guarantees it for /api). */
export function useDatabaseHandle(): DatabaseHandle {
  if (!ready) throw new Error('The database is not ready yet: await databaseReady() first.')
  return ready
}

/** What the configuration says about the database, but the migrations (see openAppDatabase). */
export function databaseOptions(config: AppConfig): Omit<OpenDatabaseOptions, 'migrations'> {
  return {
    url: config.DATABASE_URL,
    poolMode: config.DATABASE_POOL_MODE,
    poolSize: config.DATABASE_POOL_SIZE,
    directUrl: config.DATABASE_DIRECT_URL,
    caFile: config.DATABASE_CA_FILE,
    pgliteDir: config.PGLITE_DIR,
    schema,
    applicationName: 'idempotent-checkout',
    // The app runs the patched postgres.js (checkPatchedDriver), whose reserved connections fail
    // their queries when they close: transactions may be pipelined on them.
    pipelining: true,
  }
}

/**
 * The app's database: its own migrations first (drizzle's default journal table), then the
 * idempotency module's, which create only what the app's did not.
 */
export function openAppDatabase(config: AppConfig): Promise<DatabaseHandle> {
  if (config.DATABASE_URL) checkPatchedDriver(postgres)
  return openDatabase({ ...databaseOptions(config), migrations: [appMigrations(config), idempotencyMigrations()] }).catch(inAppSettings)
}

/** db-kit's refusal of a transaction pooler in session mode, worded with this app's settings. */
export function inAppSettings(error: unknown): never {
  if (error instanceof TransactionPoolerError) {
    throw new TransactionPoolerError(`DATABASE_URL: ${error.message} Set DATABASE_POOL_MODE=transaction, and DATABASE_DIRECT_URL to a direct connection if you have one.`, { cause: error })
  }
  throw error
}

/** The app's own migrations (drizzle's default journal table); they run before the module's. */
export function appMigrations(config: Pick<AppConfig, 'MIGRATIONS_DIR'>) {
  return { folder: config.MIGRATIONS_DIR ?? shippedMigrationsDir(), table: '__drizzle_migrations' }
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
