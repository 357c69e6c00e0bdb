import { cpSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { addServerImports, addServerPlugin, addTypeTemplate, createResolver, defineNuxtModule, tryResolveModule } from '@nuxt/kit'
import { defu } from 'defu'
import { checkedMigrationsDir, SHIPPED_APP_MIGRATIONS_DIR, SHIPPED_MIGRATIONS_DIR } from './runtime/core/migrations'

export interface ModuleOptions {
  /** postgres:// URL of the records' database. Default: `DATABASE_URL` at run time; none: embedded PGlite in `pgliteDir`. */
  databaseUrl: string
  /** `transaction` when the URL is a transaction pooler (PgBouncer, Supavisor, RDS Proxy): no named prepared statements, timeouts set per transaction. */
  databasePoolMode: '' | 'session' | 'transaction'
  /** A direct postgres:// URL (not through the pooler) for migrations and LISTEN, when `databaseUrl` is a transaction pooler. */
  databaseDirectUrl: string
  /** Where the embedded database lives when there is no URL. */
  pgliteDir: string
  /** redis:// URL for the processing locks and the shared replay cache. Default: `REDIS_URL` at run time; none: in-process locks (one instance). */
  redisUrl: string
  /** A Redis Cluster instead: `host:port` of any of its nodes, comma-separated. Default: `REDIS_CLUSTER_NODES` at run time. */
  redisClusterNodes: string
  /** A master found through Sentinel instead: `host:port` of the sentinels, comma-separated. Default: `REDIS_SENTINELS` at run time. */
  redisSentinels: string
  /** The master's name the sentinels monitor. Default: `REDIS_SENTINEL_NAME` at run time. */
  redisSentinelName: string
  /** Seconds a key is remembered: a retry within it is a replay, after it a new request. */
  ttl: number
  /** How long a duplicate of a request in flight waits for its result (ms) before a 409; `Prefer: wait=N` asks per request. */
  waitMs: number
  /** Processing lock of an atomic request (ms), renewed while it runs. */
  lockTtlMs: number
  /** Lease of a claimed (leased) request (ms), renewed while it runs; after a crash the key is free again once it ran out. */
  leaseMs: number
  /** A request without a key is refused (400). false: it runs unprotected. */
  required: boolean
  /** Put before every scope: apps sharing one database keep their keys apart. */
  keyPrefix: string
  /** This instance's replay cache, in bytes of stored responses. */
  replayCacheBytes: number
  /** Signs the shared replay cache's entries (the same on every instance). Default: derived from the database URL. */
  replayCacheSecret: string
  /** The Nitro storage mount of the shared replay cache (mounted on Redis when there is a Redis URL). */
  storage: string
  /** false: the app opens the database itself and calls provideIdempotency(). */
  connect: boolean
  /**
   * The app's own drizzle-kit migrations folders, applied before the module's on the same database
   * (journal `drizzle.__drizzle_migrations`); its handlers reach that database with useIdempotencyDatabase().
   * Absolute, or relative to the Nuxt rootDir; the build ships a copy of each. Set at run time
   * (NUXT_IDEMPOTENCY_APP_MIGRATIONS_DIRS, comma-separated), they replace the shipped ones and are
   * read relative to the working directory.
   */
  appMigrationsDirs: string[]
  /** Largest request body an idempotent handler reads, in bytes (default 1 MiB); a larger one is refused with a 413 and nothing runs. */
  maxBodyBytes: number
  /** A response whose stored form (JSON) is larger is answered but not stored, and the key is free again. 0: no limit. */
  maxResponseBytes: number
  /**
   * Encrypts stored responses (body and headers) in Postgres and in the shared replay cache with
   * AES-256-GCM: comma-separated base64 keys of 32 bytes, the first seals, any listed one opens
   * (rotation: the new key first, the old one kept until the TTL has passed). Empty: off.
   * Set it with NUXT_IDEMPOTENCY_ENCRYPTION_KEYS at run time, never in the build.
   */
  encryptionKeys: string
}

const defaults: ModuleOptions = {
  databaseUrl: '',
  databasePoolMode: '',
  databaseDirectUrl: '',
  pgliteDir: '.data/idempotency',
  redisUrl: '',
  redisClusterNodes: '',
  redisSentinels: '',
  redisSentinelName: '',
  ttl: 86_400,
  waitMs: 0,
  lockTtlMs: 10_000,
  leaseMs: 30_000,
  required: true,
  keyPrefix: '',
  replayCacheBytes: 8 * 1024 * 1024,
  replayCacheSecret: '',
  storage: 'idempotency',
  connect: true,
  appMigrationsDirs: [],
  maxBodyBytes: 1_048_576,
  maxResponseBytes: 0,
  encryptionKeys: '',
}

const serverUtilities = {
  'runtime/server/handler': ['defineIdempotentEventHandler', 'runIdempotentRoute', 'requireIdempotencyKey'],
  'runtime/server/run-once': ['runOnce', 'IdempotencyInProgressError'],
  'runtime/server/webhooks': ['defineWebhookProvider', 'defineIdempotentWebhookHandler', 'standardWebhooksProvider', 'stripeWebhookProvider', 'midtransWebhookProvider'],
  'runtime/server/services': ['idempotencyReady', 'provideIdempotency', 'useIdempotencyDatabase'],
}

export default defineNuxtModule<ModuleOptions>({
  meta: { name: 'nuxt-idempotency', configKey: 'idempotency', compatibility: { nuxt: '>=3.13.0' } },
  defaults,
  async setup(options, nuxt) {
    const resolver = createResolver(import.meta.url)
    const migrationsDir = resolver.resolve('./runtime/migrations')

    const drivers = await checkDrivers(options, nuxt.options.rootDir)

    // The app's folders, found now (relative to rootDir) and shipped with the build: the built server
    // reads its copies, whatever its working directory.
    const appMigrationsDirs = options.appMigrationsDirs.map(folder => checkedMigrationsDir(resolve(nuxt.options.rootDir, folder), 'build'))

    // Runtime values come from here, overridable by NUXT_IDEMPOTENCY_* at run time. No path of this
    // machine goes in: the migrations are found next to the built server (or the module's files).
    nuxt.options.runtimeConfig.idempotency = defu(nuxt.options.runtimeConfig.idempotency as Partial<ModuleOptions> | undefined, { ...options, appMigrationsDirs: [] })

    for (const [file, names] of Object.entries(serverUtilities)) {
      addServerImports(names.map(name => ({ name, from: resolver.resolve(`./${file}`) })))
    }
    addServerPlugin(resolver.resolve('./runtime/server/plugins/idempotency'))

    nuxt.hook('nitro:config', (config) => {
      config.externals = defu(config.externals, { inline: [resolver.resolve('./runtime')] })
      // PGlite loads its WASM and data files relative to its own module: it stays external, when
      // installed (an external that cannot be resolved is a build warning).
      if (drivers.pglite) config.externals.external = [...(config.externals.external ?? []), '@electric-sql/pglite']
      // Without it, db-kit's import of it (reached only without a database URL) stays as written,
      // unresolved and without a warning: starting without a URL then names the package to install.
      else config.rollupConfig = { ...config.rollupConfig, plugins: [...asArray(config.rollupConfig?.plugins), pgliteAbsent] }
    })

    // The server applies the migrations at start-up: ship them with the build (`nuxi dev`'s too).
    // A hook of its own, beside any `compiled` hook the app's nitro config has.
    nuxt.hook('nitro:init', (nitro) => {
      nitro.hooks.hook('compiled', () => {
        const serverDir = nitro.options.output.serverDir
        cpSync(migrationsDir, join(serverDir, SHIPPED_MIGRATIONS_DIR), { recursive: true })
        const shipped = join(serverDir, SHIPPED_APP_MIGRATIONS_DIR)
        rmSync(shipped, { recursive: true, force: true })
        if (!appMigrationsDirs.length) return
        appMigrationsDirs.forEach((folder, index) => cpSync(folder, join(shipped, String(index)), { recursive: true }))
        writeFileSync(join(shipped, 'order.json'), `${JSON.stringify(appMigrationsDirs.map((_, index) => String(index)))}\n`)
      })
    })

    // NuxtHub applies the migrations folders it is given with its own database.
    // @ts-expect-error The hook exists only where NuxtHub is installed.
    nuxt.hook('hub:db:migrations:dirs', (dirs: string[]) => {
      dirs.push(migrationsDir)
    })

    addTypeTemplate({
      filename: 'types/nuxt-idempotency.d.ts',
      getContents: () => `
import type { IdempotencyOutcomeReport, IdempotencyRouteRules } from ${JSON.stringify(resolver.resolve('./runtime/server/handler'))}
declare module 'nitropack' {
  interface NitroRouteConfig { idempotency?: IdempotencyRouteRules }
  interface NitroRouteRules { idempotency?: IdempotencyRouteRules }
  interface NitroRuntimeHooks { 'idempotency:outcome': (report: IdempotencyOutcomeReport) => void }
}
declare module 'nitropack/types' {
  interface NitroRouteConfig { idempotency?: IdempotencyRouteRules }
  interface NitroRouteRules { idempotency?: IdempotencyRouteRules }
  interface NitroRuntimeHooks { 'idempotency:outcome': (report: IdempotencyOutcomeReport) => void }
}
export {}
`,
    }, { nitro: true, nuxt: true })
  },
})

/**
 * The drivers are the app's optional peer dependencies: the embedded database needs PGlite, a
 * database URL postgres.js, a Redis URL ioredis. A build without any database driver stops here,
 * with the command that installs one.
 */
async function checkDrivers(options: ModuleOptions, rootDir: string): Promise<{ pglite: boolean }> {
  const installed = async (name: string) => Boolean(await tryResolveModule(name, rootDir))
  const [postgres, pglite] = await Promise.all([installed('postgres'), installed('@electric-sql/pglite')])
  if (!options.connect) return { pglite }
  if (!postgres && !pglite) {
    throw new Error('nuxt-idempotency needs a database driver: `npm install postgres@3` (for DATABASE_URL) and/or `npm install @electric-sql/pglite` (the embedded default).')
  }
  const redis = options.redisUrl || options.redisClusterNodes || options.redisSentinels || process.env.REDIS_URL || process.env.REDIS_CLUSTER_NODES || process.env.REDIS_SENTINELS
  if (redis && !await installed('ioredis')) {
    throw new Error('nuxt-idempotency: a Redis URL is set but ioredis is not installed: `npm install ioredis@5`.')
  }
  return { pglite }
}

/** A Rollup plugin: `@electric-sql/pglite` is external, unresolved (it is not installed). */
const pgliteAbsent = {
  name: 'nuxt-idempotency:pglite-absent',
  resolveId: (id: string) => (id === '@electric-sql/pglite' ? { id, external: true } : null),
}

const asArray = <T>(value: T | T[] | undefined | null | false): T[] => (Array.isArray(value) ? value : value ? [value] : [])
