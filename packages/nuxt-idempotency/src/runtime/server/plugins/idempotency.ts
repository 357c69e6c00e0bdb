import { closeIdempotency, idempotencyReady, useIdempotencyOptions } from '../services'
import { defineNitroPlugin } from '#imports'

/**
 * Opens the database (applying the module's migrations) and the locks at start-up, so a bad URL or
 * a failed migration stops the server at once instead of failing its first requests. Nitro does not
 * await plugins: requests await the same promise.
 */
export default defineNitroPlugin((nitroApp) => {
  if (useIdempotencyOptions().connect) {
    idempotencyReady().catch((error: unknown) => {
      console.error('[nuxt-idempotency] could not open the database:', error)
      process.exit(1)
    })
  }
  nitroApp.hooks.hook('close', closeIdempotency)
})
