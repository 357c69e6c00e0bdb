export default defineNuxtConfig({
  modules: ['nuxt-idempotency'],
  compatibilityDate: '2025-07-15',
})
