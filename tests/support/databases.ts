import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type DatabaseHandle, openDatabase } from '@idempotent-checkout/db-kit'
import { appDatabase } from './postgres-topology'
import { createTestDatabase } from './services'
import { testMigrations } from './migrations'

/**
 * A migrated database for one integration suite, on either driver the app supports: a fresh
 * database on the real Postgres server, or PGlite in a fresh temporary directory.
 */

export type DatabaseDriver = DatabaseHandle['driver']

export interface SuiteDatabase {
  handle: DatabaseHandle
  /** Closes the connections, then drops the database or deletes the PGlite directory. */
  close: () => Promise<void>
}

/**
 * `poolSize` sizes the Postgres connection pool; PGlite always has a single connection. Postgres
 * transactions are pipelined as the app's are, unless `pipelining: false` (postgres.js' own begin).
 */
export async function openSuiteDatabase(driver: DatabaseDriver, label: string, options: { poolSize?: number, pipelining?: boolean } = {}): Promise<SuiteDatabase> {
  if (driver === 'postgres') {
    const database = await createTestDatabase(label)
    const pipelining = options.pipelining ?? true
    return openCleaningUp(() => openDatabase({ ...appDatabase(database.url), pgliteDir: '', migrations: testMigrations, poolSize: options.poolSize, pipelining }), database.drop)
  }
  const pgliteDir = await mkdtemp(join(tmpdir(), `ic-${label.replace(/\W+/g, '-')}-`))
  return openCleaningUp(() => openDatabase({ pgliteDir, migrations: testMigrations }), () => rm(pgliteDir, { recursive: true, force: true }))
}

/** Opens the handle; `cleanUp` runs after it closes, or at once when opening (migrating) fails. */
async function openCleaningUp(open: () => Promise<DatabaseHandle>, cleanUp: () => Promise<void>): Promise<SuiteDatabase> {
  let handle: DatabaseHandle
  try {
    handle = await open()
  }
  catch (error) {
    await cleanUp()
    throw error
  }
  const close = async () => {
    await handle.close()
    await cleanUp()
  }
  return { handle, close }
}
