export * from '../../packages/nuxt-idempotency/test/support/ports.mjs'
