import { fileURLToPath } from 'node:url'
import { idempotencyMigrations } from 'nuxt-idempotency/core'
import { appMigrations } from '../../server/db'

/** What the server applies at start-up: the app's migrations, then the idempotency module's. */
export const testMigrations = [appMigrations({ MIGRATIONS_DIR: fileURLToPath(new URL('../../drizzle', import.meta.url)) }), idempotencyMigrations()]
