export * from '../../packages/nuxt-idempotency/test/support/pgbouncer.mjs'
