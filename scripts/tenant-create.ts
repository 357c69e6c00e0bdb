/**
 * `npm run tenant:create -- <name>`: creates a tenant and prints its secret key (shown once).
 * Uses the same configuration as the server (DATABASE_URL, or the embedded PGlite in .data/ —
 * stop `npm run dev` first there: PGlite allows one process at a time).
 */
import { parseConfig } from '../server/config'
import { openDatabase } from '../server/db/client'
import { createTenant } from '../server/tenants/service'

const name = process.argv.slice(2).join(' ').trim()
if (!name || name.length > 100) {
  console.error('Usage: npm run tenant:create -- <name>   (1–100 characters)')
  process.exit(2)
}
const config = parseConfig(process.env, { dev: true })
const handle = await openDatabase({ url: config.DATABASE_URL, pgliteDir: config.PGLITE_DIR, migrationsDir: config.MIGRATIONS_DIR })
try {
  const { tenant, secretKey } = await createTenant(handle.db, name, { requestId: null, detail: { via: 'cli' } })
  console.log(JSON.stringify({ tenant, secretKey }, null, 2))
  console.error('Keep the secret key now: only its hash is stored.')
}
finally {
  await handle.close()
}
