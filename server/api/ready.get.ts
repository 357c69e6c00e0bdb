import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import { pingLocks, useLocks } from '../locks'
import { providerHealth } from '../payments/health'

/** A readiness probe must answer quickly even when a dependency hangs. */
const CHECK_TIMEOUT_MS = 2000

async function timed(check: () => Promise<boolean>): Promise<{ ok: boolean, latencyMs: number }> {
  const started = performance.now()
  const timeout = new Promise<boolean>(resolve => setTimeout(resolve, CHECK_TIMEOUT_MS, false).unref())
  const ok = await Promise.race([check().catch(() => false), timeout])
  return { ok, latencyMs: Math.round((performance.now() - started) * 10) / 10 }
}

// Readiness: Postgres (or PGlite) answers and the lock backend (Redis, when configured) answers,
// each with its round-trip time; 503 + Retry-After when either does not. Anyone may ask (load
// balancers do); what this deployment has switched on is for operators only (the ops token): the
// unsafe test and demo features (`warnings`, never a reason to be unready), the webhook endpoints it
// serves, and the payment provider's health.
export default defineEventHandler(async (event) => {
  const handle = useDatabaseHandle()
  const [database, locks] = await Promise.all([
    timed(() => handle.ping().then(() => true)),
    timed(pingLocks),
  ])
  const ready = database.ok && locks.ok
  if (!ready) setResponseHeader(event, 'Retry-After', 2)
  setResponseStatus(event, ready ? 200 : 503)
  const readiness = {
    status: ready ? 'ready' : 'unavailable',
    checks: { database: { driver: handle.driver, poolMode: handle.poolMode, ...database }, locks: { backend: useLocks().kind, ...locks } },
  }
  if (!hasOpsToken(event)) return readiness
  return {
    ...readiness,
    warnings: useConfig().warnings,
    // A provider without its secret answers 404.
    webhooks: { providers: useConfig().webhookProviders },
    // Whether the payment provider is failing (calls waiting for their retry). A provider outage
    // never makes the app unready: orders are taken and their payments asked for later.
    ...(database.ok && { payments: await providerHealth(handle.db).catch(() => undefined) }),
  }
})
