import { cpSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { answerUnparseableRequests } from './server/http/client-errors'

// Runtime values (DATABASE_URL, secrets, …) are read from the environment by server/config at
// start-up, never here: this file is frozen at build time.
// APP_BUILD_ROOT puts .nuxt and .output elsewhere, so separate builds can be run side by side.
const buildRoot = process.env.APP_BUILD_ROOT
/** Where the API reference's Redoc bundle is served from. */
const REDOC_BASE_URL = '/_redoc'
const moduleSyncOnlyFiles = ['async-function/require.mjs', 'async-generator-function/require.mjs', 'generator-function/require.mjs']

export default defineNuxtConfig({
  ...(buildRoot && { buildDir: `${buildRoot}/.nuxt` }),
  compatibilityDate: '2025-07-15',
  // @nuxt/eslint generates the project-aware flat ESLint config (.nuxt/eslint.config.mjs) that
  // eslint.config.mjs extends. nuxt-idempotency (packages/) is the idempotency layer itself.
  modules: ['@nuxt/eslint', 'nuxt-idempotency'],
  // The layer runs on the app's own database, locks and Redis (server/plugins/idempotency.ts).
  idempotency: { connect: false },
  eslint: { config: { stylistic: true } },
  devtools: { enabled: false },
  telemetry: false,
  typescript: { strict: true },
  css: ['~/assets/css/base.css'],
  nitro: {
    // The server runs on Node ≥ 20, which has BigInt literals (nitro's default target, es2019, warns on them).
    esbuild: { options: { target: 'es2022' } },
    ...(buildRoot && { output: { dir: `${buildRoot}/.output` } }),
    externals: {
      // PGlite ships WASM and data files it loads relative to its own module: keep it external.
      external: ['@electric-sql/pglite'],
      // Node ≥ 20.19 requires these (under get-intrinsic, from axios, from midtrans-client) through their
      // `module-sync` export, which the file tracer only follows on Node 22: ship those files too.
      traceInclude: moduleSyncOnlyFiles.map(file => fileURLToPath(new URL(`./node_modules/${file}`, import.meta.url))),
    },
    // The API reference at /docs (server/routes/docs.get.ts) loads Redoc's bundle from the build
    // itself; the file never changes within a build, so browsers may keep it for a day.
    routeRules: { [`${REDOC_BASE_URL}/**`]: { headers: { 'cache-control': 'public, max-age=86400' } } },
    hooks: {
      // The server applies the migrations at start-up: ship them, so `.output` alone deploys and
      // starts from any working directory (see shippedMigrationsDir in server/db/client.ts).
      compiled(nitro) {
        cpSync(fileURLToPath(new URL('./drizzle', import.meta.url)), join(nitro.options.output.serverDir, 'drizzle'), { recursive: true })
      },
    },
  },
  // `nuxt dev` builds no public folder: it serves Redoc's bundles where they are.
  $development: {
    nitro: { publicAssets: [{ dir: fileURLToPath(new URL('./node_modules/redoc/bundles', import.meta.url)), baseURL: REDOC_BASE_URL }] },
  },
  hooks: {
    // Redoc's one standalone file, not its folder: its source maps would triple what ships. Copied
    // with the other public assets, before the build lists them for the static handler.
    'nitro:build:public-assets'(nitro) {
      const target = join(nitro.options.output.publicDir, REDOC_BASE_URL)
      mkdirSync(target, { recursive: true })
      cpSync(fileURLToPath(new URL('./node_modules/redoc/bundles/redoc.standalone.js', import.meta.url)), join(target, 'redoc.standalone.js'))
    },
    // `nuxt dev` serves clients from its own listener: answer what Node's parser rejects there as the built server does.
    listen(server) {
      answerUnparseableRequests(server)
    },
    // API errors become problem+json first; everything else keeps Nuxt's own error handling.
    'nitro:config'(config) {
      const nuxtHandlers = [config.errorHandler ?? []].flat()
      config.errorHandler = [fileURLToPath(new URL('./server/error-handler.ts', import.meta.url)), ...nuxtHandlers] as unknown as string
    },
  },
})
