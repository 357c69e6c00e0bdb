import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { MigrationSource } from '@idempotent-checkout/db-kit'

/** The module's migrations journal: beside an app's own (`__drizzle_migrations`), never mixed with it. */
export const IDEMPOTENCY_MIGRATIONS_TABLE = '__idempotency_migrations'
/** A build ships the module's migrations under this name next to the server's entry (see module.ts). */
export const SHIPPED_MIGRATIONS_DIR = 'idempotency-migrations'

/**
 * The module's migrations: the copy shipped next to the built server when there is one above this
 * file, else `fallbackDir` (the sources', known at build time), else the folder beside this file
 * in the package itself.
 */
export function idempotencyMigrations(fallbackDir?: string): MigrationSource {
  const here = dirname(fileURLToPath(import.meta.url))
  for (let dir = here; ; dir = dirname(dir)) {
    if (existsSync(join(dir, SHIPPED_MIGRATIONS_DIR, 'meta', '_journal.json'))) return { folder: join(dir, SHIPPED_MIGRATIONS_DIR), table: IDEMPOTENCY_MIGRATIONS_TABLE }
    if (dirname(dir) === dir) break
  }
  const beside = join(here, '..', 'migrations')
  return { folder: fallbackDir && existsSync(fallbackDir) ? fallbackDir : beside, table: IDEMPOTENCY_MIGRATIONS_TABLE }
}
