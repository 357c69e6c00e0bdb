export * from '../../packages/nuxt-idempotency/test/support/test-certificates.mjs'
