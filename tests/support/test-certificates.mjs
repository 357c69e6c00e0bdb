// Kept with nuxt-idempotency's suites, which must run on their own (`npm test -w nuxt-idempotency`).
export * from '../../packages/nuxt-idempotency/test/support/test-certificates.mjs'
