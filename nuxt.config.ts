import { fileURLToPath } from 'node:url'

// Runtime values (DATABASE_URL, secrets, …) are read from the environment by server/config at
// start-up, never here: this file is frozen at build time.
export default defineNuxtConfig({
  compatibilityDate: '2025-07-15',
  devtools: { enabled: false },
  telemetry: false,
  typescript: { strict: true },
  nitro: {
    experimental: { tasks: true },
    // PGlite ships WASM and data files it loads relative to its own module: keep it external.
    externals: { external: ['@electric-sql/pglite'] },
  },
  hooks: {
    // API errors become problem+json first; everything else keeps Nuxt's own error handling.
    'nitro:config'(config) {
      const nuxtHandlers = [config.errorHandler ?? []].flat()
      config.errorHandler = [fileURLToPath(new URL('./server/error-handler.ts', import.meta.url)), ...nuxtHandlers] as unknown as string
    },
  },
})
