import { type AppConfig, useConfig } from '../config'
import { type Database, type DatabaseHandle, openDatabase, type OpenDatabaseOptions } from './client'

export type { Database, DatabaseHandle }

let opening: Promise<DatabaseHandle> | undefined
let ready: DatabaseHandle | undefined

/** Opens the database and applies migrations once per process; every request awaits this first. */
export function databaseReady(): Promise<DatabaseHandle> {
  // Opened on the next turn of the event loop: the start-up plugin asks while the bundle is still
  // being loaded, and Nitro points import.meta.url at the server's entry (next to the migrations
  // the build ships, see shippedMigrationsDir) only once that is done.
  opening ??= new Promise(resolve => setImmediate(resolve)).then(() => {
    return openDatabase(databaseOptions(useConfig()))
  }).then(handle => (ready = handle))
  return opening
}

/** The database, once `databaseReady()` resolved (the request middleware guarantees it for /api). */
export function useDatabaseHandle(): DatabaseHandle {
  if (!ready) throw new Error('The database is not ready yet: await databaseReady() first.')
  return ready
}

/** What the configuration says about the database, for every entry point that opens it. */
export function databaseOptions(config: AppConfig): OpenDatabaseOptions {
  return {
    url: config.DATABASE_URL,
    poolMode: config.DATABASE_POOL_MODE,
    directUrl: config.DATABASE_DIRECT_URL,
    caFile: config.DATABASE_CA_FILE,
    pgliteDir: config.PGLITE_DIR,
    migrationsDir: config.MIGRATIONS_DIR,
  }
}
