import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { MigrationSource } from '@idempotent-checkout/db-kit'

/** The module's migrations journal: beside an app's own (`__drizzle_migrations`), never mixed with it. */
export const IDEMPOTENCY_MIGRATIONS_TABLE = '__idempotency_migrations'
/** A build ships the module's migrations under this name next to the server's entry (see module.ts). */
export const SHIPPED_MIGRATIONS_DIR = 'idempotency-migrations'
/** A build ships the app's `appMigrationsDirs` here, one numbered folder each, listed in order.json. */
export const SHIPPED_APP_MIGRATIONS_DIR = 'idempotency-app-migrations'

/**
 * The nearest folder named `name` above this file: next to the built server's entry (a build, or
 * `nuxi dev`'s build under .nuxt/dev), which this file is bundled into. Found from import.meta.url,
 * so the build carries no path of the machine that built it.
 */
function shippedAbove(name: string, marker: string): string | undefined {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, name, marker))) return join(dir, name)
    if (dirname(dir) === dir) return undefined
  }
}

/**
 * The module's migrations: the copy shipped next to the built server when there is one above this
 * file, else the folder beside this file in the package itself (an app or worker importing
 * nuxt-idempotency/core without bundling it).
 */
export function idempotencyMigrations(): MigrationSource {
  const folder = shippedAbove(SHIPPED_MIGRATIONS_DIR, join('meta', '_journal.json'))
    ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations')
  return { folder, table: IDEMPOTENCY_MIGRATIONS_TABLE }
}

/** The app's migrations folders the build shipped (`appMigrationsDirs`), in their order; none outside a build. */
export function shippedAppMigrationsDirs(): string[] {
  const shipped = shippedAbove(SHIPPED_APP_MIGRATIONS_DIR, 'order.json')
  if (!shipped) return []
  return (JSON.parse(readFileSync(join(shipped, 'order.json'), 'utf8')) as string[]).map(name => join(shipped, name))
}

/**
 * `folder` (resolved) when it is a drizzle-kit migrations folder; else an error that names the
 * folder, the setting and what to run. `when`: at build time relative entries are read from the
 * Nuxt rootDir, at run time from the working directory.
 */
export function checkedMigrationsDir(folder: string, when: 'build' | 'run'): string {
  const absolute = resolve(folder)
  const problem = !existsSync(absolute) ? 'does not exist' : !existsSync(join(absolute, 'meta', '_journal.json')) ? 'has no meta/_journal.json' : undefined
  if (!problem) return absolute
  const relativeTo = when === 'build' ? 'the Nuxt rootDir' : 'the working directory'
  throw new Error(`nuxt-idempotency: the app migrations folder ${absolute} ${problem}. Check the setting idempotency.appMigrationsDirs `
    + `(NUXT_IDEMPOTENCY_APP_MIGRATIONS_DIRS at run time; relative entries are read from ${relativeTo}), `
    + `and generate the folder's migrations with \`npx drizzle-kit generate\` (its \`out\` folder).`)
}
