export * from '../../packages/nuxt-idempotency/test/support/redis-topology-servers.mjs'
