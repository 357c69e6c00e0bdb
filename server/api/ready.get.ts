import { useDatabaseHandle } from '../db'
import { pingLocks, useLocks } from '../locks'

// Readiness: Postgres (or PGlite) answers and the lock backend (Redis, when configured) answers.
export default defineEventHandler(async (event) => {
  const database = await useDatabaseHandle().ping().then(() => true, () => false)
  const locks = await pingLocks()
  const ready = database && locks
  if (!ready) setResponseHeader(event, 'Retry-After', 2)
  setResponseStatus(event, ready ? 200 : 503)
  return { status: ready ? 'ready' : 'unavailable', database, locks: { backend: useLocks().kind, reachable: locks } }
})
