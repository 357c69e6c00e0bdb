import { fileURLToPath } from 'node:url'

export default defineNuxtConfig({
  modules: ['nuxt-idempotency'],
  compatibilityDate: '2025-07-15',
  idempotency: {
    // The app's own table (outside_in_writes), written by the atomic route in the record's transaction.
    appMigrationsDirs: [fileURLToPath(new URL('./migrations', import.meta.url))],
  },
  runtimeConfig: {
    // The webhook endpoint's signing secret (`whsec_…`): NUXT_WEBHOOK_SECRET.
    webhookSecret: '',
  },
})
