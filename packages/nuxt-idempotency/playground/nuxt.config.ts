// Develop the module against a real app: `npx nuxi dev packages/nuxt-idempotency/playground`.
export default defineNuxtConfig({
  modules: ['../src/module'],
  compatibilityDate: '2025-01-01',
  devtools: { enabled: false },
  idempotency: {},
})
