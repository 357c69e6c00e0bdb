import { closeIdempotency, deleteExpiredRecords, idempotencyReady, useIdempotencyOptions } from '../services'
import { defineNitroPlugin } from '#imports'

/**
 * How often expired records are deleted (an expired record already answers as absent: this only
 * keeps the table small). A run is bounded by time, not rows: its budget at this interval is what
 * keeps up with the write rate.
 */
const RETENTION_INTERVAL_MS = 60_000

/**
 * Opens the database (applying the module's migrations) and the locks at start-up, so a bad URL or
 * a failed migration stops the server at once instead of failing its first requests. Nitro does not
 * await plugins: requests await the same promise.
 */
export default defineNitroPlugin((nitroApp) => {
  let retention: ReturnType<typeof setInterval> | undefined
  if (useIdempotencyOptions().connect) {
    idempotencyReady().then(
      (services) => {
        retention = setInterval(() => void deleteExpiredRecords(services).catch(() => {}), RETENTION_INTERVAL_MS)
        retention.unref()
      },
      (error: unknown) => {
        console.error('[nuxt-idempotency] could not open the database:', error)
        process.exit(1)
      },
    )
  }
  nitroApp.hooks.hook('close', async () => {
    clearInterval(retention)
    await closeIdempotency()
  })
})
