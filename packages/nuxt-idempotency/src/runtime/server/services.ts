import { createHmac } from 'node:crypto'
import type { Storage } from 'unstorage'
import { createReplayCache, idempotencyMigrations, type IdempotencyDeps } from '../core'
import type { MigrationSource } from '../db/client'
import { openDatabase } from '../db'
import { createMemoryLocks, createRedisLocks, type Locks } from '../locks'
import { useRuntimeConfig, useStorage } from '#imports'

/**
 * What the layer runs on: the database, the locks and the replay cache. Opened once per process
 * from the module's options (`connect`, the default), or handed over by a host app that opens its
 * own database with the same drivers (`provideIdempotency`). Every request awaits it first.
 */

export interface IdempotencyServices extends IdempotencyDeps {
  close(): Promise<void>
}

/** The module's runtime options (runtimeConfig.idempotency, so NUXT_IDEMPOTENCY_* env overrides them). */
export interface IdempotencyRuntimeOptions {
  connect: boolean
  databaseUrl: string
  pgliteDir: string
  redisUrl: string
  ttl: number
  waitMs: number
  lockTtlMs: number
  leaseMs: number
  required: boolean
  keyPrefix: string
  replayCacheBytes: number
  replayCacheSecret: string
  storage: string
  migrationsDir: string
}

let opening: Promise<IdempotencyServices> | undefined

export function useIdempotencyOptions(): IdempotencyRuntimeOptions {
  return useRuntimeConfig().idempotency as unknown as IdempotencyRuntimeOptions
}

/** Hands the layer a database, locks and replay cache opened by the app (with `connect: false`). */
export function provideIdempotency(services: IdempotencyServices | Promise<IdempotencyServices>): void {
  opening = Promise.resolve(services)
}

/** The services, opened on first use (and at start-up by the module's plugin). */
export function idempotencyReady(): Promise<IdempotencyServices> {
  if (opening) return opening
  const options = useIdempotencyOptions()
  if (!options.connect) {
    return Promise.reject(new Error('nuxt-idempotency: `connect` is false but the app has not called provideIdempotency() yet.'))
  }
  opening = connect(options)
  return opening
}

export async function closeIdempotency(): Promise<void> {
  const services = await opening?.catch(() => undefined)
  opening = undefined
  await services?.close()
}

async function connect(options: IdempotencyRuntimeOptions): Promise<IdempotencyServices> {
  const databaseUrl = options.databaseUrl || process.env.DATABASE_URL || undefined
  const redisUrl = options.redisUrl || process.env.REDIS_URL || undefined
  const database = await openDatabase({
    url: databaseUrl,
    pgliteDir: options.pgliteDir,
    migrations: [moduleMigrations()],
  })
  const redis = redisUrl ? await openRedis(redisUrl) : undefined
  const locks: Locks = redis ? createRedisLocks(redis.client) : createMemoryLocks()
  const replays = createReplayCache({
    maxBytes: options.replayCacheBytes,
    shared: redis && { storage: redis.storage(options.storage), signingKey: options.replayCacheSecret || derivedSigningKey(databaseUrl) },
  })
  return {
    database, locks, replays, lockTtlMs: options.lockTtlMs, leaseMs: options.leaseMs,
    close: async () => {
      await locks.close()
      await database.close()
    },
  }
}

/**
 * Without a configured secret the shared replay entries are signed with a key derived from the
 * database URL: every instance of one deployment has it, and someone who can only write to Redis does not.
 */
const derivedSigningKey = (databaseUrl: string | undefined) =>
  createHmac('sha256', 'nuxt-idempotency replay cache').update(databaseUrl ?? 'embedded').digest('base64url')

async function openRedis(url: string): Promise<{ client: import('ioredis').Redis, storage: (mount: string) => Storage }> {
  const [{ default: Redis }, { default: redisDriver }] = await Promise.all([
    import('ioredis').catch(() => {
      throw new Error('nuxt-idempotency: REDIS_URL is set but ioredis is not installed. Run `npm install ioredis@5`.')
    }),
    import('unstorage/drivers/redis'),
  ])
  // Fail fast while Redis is away: the unique index in Postgres decides alone meanwhile.
  const settings = { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 1000, retryStrategy: (attempt: number) => Math.min(attempt * 100, 2000) }
  const client = new Redis(url, settings)
  client.on('error', () => {})
  return {
    client,
    storage: (mount) => {
      useStorage().mount(mount, redisDriver({ url, base: 'idempotency:replay', ...settings }))
      return useStorage(mount)
    },
  }
}

/** The module's migrations, for an app that opens the database itself (they run after its own). */
export function moduleMigrations(): MigrationSource {
  return idempotencyMigrations(useIdempotencyOptions().migrationsDir)
}
