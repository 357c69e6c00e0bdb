/**
 * `npm run tenant:create -- <name>`: creates a tenant and prints its secret key (shown once).
 * Uses the same configuration as the server (DATABASE_URL, or the embedded PGlite in .data/). The
 * embedded database allows one process: while `npm run dev` holds it, this refuses and says how to
 * create the tenant through the running server instead.
 */
import { ConfigError, parseConfig } from '../server/config'
import { openAppDatabase } from '../server/db'
import { PgliteDirLockedError } from '@idempotent-checkout/db-kit'
import { createTenant } from '../server/tenants/service'

const name = process.argv.slice(2).join(' ').trim()
if (!name || name.length > 100) {
  console.error('Usage: npm run tenant:create -- <name>   (1–100 characters)')
  process.exit(2)
}
let config
try {
  config = parseConfig(process.env, { dev: true, keepSecrets: true })
}
catch (error) {
  console.error(error instanceof ConfigError ? error.message : error)
  process.exit(1)
}
let handle
try {
  handle = await openAppDatabase(config)
}
catch (error) {
  if (!(error instanceof PgliteDirLockedError)) throw error
  const token = config.generatedSecrets.includes('OPS_TOKEN')
    ? `OPS_TOKEN=${config.OPS_TOKEN} (printed at its start, kept in ${config.secretsFile})`
    : 'its OPS_TOKEN (the one in your environment)'
  console.error(`${error.message}\n\nTo create the tenant while that server runs, ask it with ${token}:\n`
    + `  curl -X POST localhost:${config.PORT}/api/ops/tenants -H "Authorization: Bearer $OPS_TOKEN" -H 'Content-Type: application/json' -d '${JSON.stringify({ name }).replaceAll('\'', '\'\\\'\'')}'`)
  process.exit(1)
}
try {
  const { tenant, secretKey } = await createTenant(handle.db, name, { requestId: null, detail: { via: 'cli' } })
  console.log(JSON.stringify({ tenant, secretKey }, null, 2))
  console.error('Keep the secret key now: only its hash is stored.')
}
finally {
  await handle.close()
}
