import { createHmac } from 'node:crypto'
import type { Storage } from 'unstorage'
import { deleteInPacedBatches, RETENTION_LOCK_TTL_MS, RETENTION_PACE, openDatabase, TransactionPoolerError } from '@idempotent-checkout/db-kit'
import { createIdempotencyStore, createReplayCache, idempotencyMigrations, type IdempotencyDeps } from '../core'
import { createResponseCipher } from '../core/encryption'
import { checkedMigrationsDir, shippedAppMigrationsDirs } from '../core/migrations'
import type { DatabaseHandle, MigrationSource } from '@idempotent-checkout/db-kit'
import { createMemoryLocks, createRedisLocks, type Locks, parseHostPorts, type RedisClient } from '../locks'
import type { ModuleOptions } from '../../module'
import { useRuntimeConfig, useStorage } from '#imports'

/**
 * What the layer runs on: the database, the locks and the replay cache. Opened once per process
 * from the module's options (`connect`, the default), or handed over by a host app that opens its
 * own database with the same drivers (`provideIdempotency`). Every request awaits it first.
 */

export interface IdempotencyServices extends IdempotencyDeps {
  close(): Promise<void>
}

/**
 * The module's options as runtimeConfig.idempotency holds them (NUXT_IDEMPOTENCY_* env overrides
 * them; an env list is a comma-separated string).
 */
export interface IdempotencyRuntimeOptions extends Omit<ModuleOptions, 'appMigrationsDirs'> {
  appMigrationsDirs: string[] | string
}

let opening: Promise<IdempotencyServices> | undefined

export function useIdempotencyOptions(): IdempotencyRuntimeOptions {
  return useRuntimeConfig().idempotency as unknown as IdempotencyRuntimeOptions
}

/** Hands the layer a database, locks and replay cache opened by the app (with `connect: false`). */
export function provideIdempotency(services: IdempotencyServices | Promise<IdempotencyServices>): void {
  opening = Promise.resolve(services)
  // A failure is the app's to report (it opened them); requests awaiting the services still get it.
  opening.catch(() => {})
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

/** The database the records live in, for the app's own tables (migrated with `appMigrationsDirs`). */
export async function useIdempotencyDatabase(): Promise<DatabaseHandle> {
  return (await idempotencyReady()).database
}

export async function closeIdempotency(): Promise<void> {
  const services = await opening?.catch(() => undefined)
  opening = undefined
  await services?.close()
}

async function connect(options: IdempotencyRuntimeOptions): Promise<IdempotencyServices> {
  // The migrations are found from import.meta.url, which Nitro points at the server's entry only once
  // the bundle is loaded; the start-up plugin asks before that.
  await new Promise(resolve => setImmediate(resolve))
  const databaseUrl = options.databaseUrl || process.env.DATABASE_URL || undefined
  const redisTopology = redisTopologyOf(options)
  const database = await openDatabase({
    url: databaseUrl,
    poolMode: options.databasePoolMode || undefined,
    directUrl: options.databaseDirectUrl || undefined,
    pgliteDir: options.pgliteDir,
    // The app's own tables first (drizzle-kit folders, drizzle's journal table), then the module's.
    migrations: [...appMigrationsDirs(options).map(folder => ({ folder, table: '__drizzle_migrations' })), moduleMigrations()],
  }).catch((error: unknown) => {
    throw error instanceof TransactionPoolerError
      ? new TransactionPoolerError(`nuxt-idempotency: ${error.message} Set NUXT_IDEMPOTENCY_DATABASE_POOL_MODE=transaction (idempotency.databasePoolMode), `
        + 'and NUXT_IDEMPOTENCY_DATABASE_DIRECT_URL (idempotency.databaseDirectUrl) to a direct connection if you have one.', { cause: error })
      : error
  })
  // A malformed key stops the server here, before anything is stored under it.
  const cipher = createResponseCipher(options.encryptionKeys)
  const redis = redisTopology ? await openRedis(redisTopology) : undefined
  const locks: Locks = redis ? createRedisLocks(redis.client) : createMemoryLocks()
  const shared = sharedReplayStorage(options.storage, redis)
  const replays = createReplayCache({
    maxBytes: options.replayCacheBytes,
    shared: shared && { storage: shared, signingKey: options.replayCacheSecret || derivedSigningKey(databaseUrl) },
    cipher,
  })
  return {
    database, locks, replays, lockTtlMs: options.lockTtlMs, leaseMs: options.leaseMs, cipher, maxResponseBytes: options.maxResponseBytes,
    close: async () => {
      await locks.close()
      await database.close()
    },
  }
}

const RETENTION_LOCK = 'idempotency:retention'

/**
 * Deletes expired records, on one instance at a time (a lock), at RETENTION_PACE: until none is
 * left or the run's budget ends; returns how many.
 */
export async function deleteExpiredRecords(services: IdempotencyServices): Promise<number> {
  const token = await services.locks.acquire(RETENTION_LOCK, RETENTION_LOCK_TTL_MS)
  if (!token) return 0
  try {
    const store = createIdempotencyStore(services.database.db)
    const run = await deleteInPacedBatches({ idempotencyRecords: batch => store.deleteExpired(batch) }, RETENTION_PACE)
    return run.deleted.idempotencyRecords
  }
  finally {
    await services.locks.release(RETENTION_LOCK, token)
  }
}

/**
 * Without a configured secret the shared replay entries are signed with a key derived from the
 * database URL: every instance of one deployment has it, and someone who can only write to Redis does not.
 */
const derivedSigningKey = (databaseUrl: string | undefined) =>
  createHmac('sha256', 'nuxt-idempotency replay cache').update(databaseUrl ?? 'embedded').digest('base64url')

/**
 * The shared tier of the replay cache: the app's own mount when it configured one (`nitro.storage`),
 * else Redis when there is a Redis URL, else none (each instance's own tier only).
 */
function sharedReplayStorage(mount: string, redis: Awaited<ReturnType<typeof openRedis>> | undefined): Storage | undefined {
  if (useStorage().getMount(`${mount}:`).base === `${mount}:`) return useStorage(mount)
  return redis?.storage(mount)
}

/** One Redis, a Cluster, or a master behind Sentinel: the options' or the environment's, the first set wins in that order. */
type RedisTopology
  = | { kind: 'standalone', url: string }
    | { kind: 'cluster', nodes: Array<{ host: string, port: number }> }
    | { kind: 'sentinel', sentinels: Array<{ host: string, port: number }>, name: string }

function redisTopologyOf(options: IdempotencyRuntimeOptions): RedisTopology | undefined {
  const url = options.redisUrl || process.env.REDIS_URL
  if (url) return { kind: 'standalone', url }
  const nodes = options.redisClusterNodes || process.env.REDIS_CLUSTER_NODES
  if (nodes) return { kind: 'cluster', nodes: parseHostPorts(nodes) }
  const sentinels = options.redisSentinels || process.env.REDIS_SENTINELS
  if (!sentinels) return undefined
  const name = options.redisSentinelName || process.env.REDIS_SENTINEL_NAME
  if (!name) throw new Error('nuxt-idempotency: Redis Sentinels are set but not the master\'s name: set REDIS_SENTINEL_NAME (or redisSentinelName), e.g. "mymaster".')
  return { kind: 'sentinel', sentinels: parseHostPorts(sentinels), name }
}

async function openRedis(topology: RedisTopology): Promise<{ client: RedisClient, storage: (mount: string) => Storage }> {
  const [{ Redis, Cluster }, { default: redisDriver }] = await Promise.all([
    import('ioredis').catch(() => {
      throw new Error('nuxt-idempotency: a Redis is configured but ioredis is not installed. Run `npm install ioredis@5`.')
    }),
    import('unstorage/drivers/redis'),
  ])
  // Fail fast while Redis is away: the unique index in Postgres decides alone meanwhile. A demoted
  // master (a failover) refuses writes with READONLY: reconnect, which finds the current one.
  const settings = {
    enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 1000,
    retryStrategy: (attempt: number) => Math.min(attempt * 100, 2000),
    reconnectOnError: (error: Error) => error.message.startsWith('READONLY'),
  }
  const base = 'idempotency:replay'
  const [client, driver] = topology.kind === 'cluster'
    ? [
        new Cluster(topology.nodes, { enableOfflineQueue: false, redisOptions: settings, clusterRetryStrategy: settings.retryStrategy }),
        redisDriver({ base, cluster: topology.nodes, clusterOptions: { enableOfflineQueue: false, redisOptions: settings } }),
      ]
    : topology.kind === 'sentinel'
      ? [new Redis({ ...settings, sentinels: topology.sentinels, name: topology.name }), redisDriver({ base, ...settings, sentinels: topology.sentinels, name: topology.name })]
      : [new Redis(topology.url, settings), redisDriver({ base, url: topology.url, ...settings })]
  client.on('error', () => {})
  return {
    client,
    storage: (mount) => {
      useStorage().mount(mount, driver)
      return useStorage(mount)
    },
  }
}

/** The module's migrations, for an app that opens the database itself (they run after its own). */
export function moduleMigrations(): MigrationSource {
  return idempotencyMigrations()
}

/**
 * The app's migrations folders: set at run time (NUXT_IDEMPOTENCY_APP_MIGRATIONS_DIRS, read from the
 * working directory), else the copies the build shipped. Each must be a drizzle-kit folder.
 */
function appMigrationsDirs(options: IdempotencyRuntimeOptions): string[] {
  const configured = typeof options.appMigrationsDirs === 'string' ? options.appMigrationsDirs.split(',') : options.appMigrationsDirs
  const folders = configured.map(folder => folder.trim()).filter(Boolean)
  return folders.length ? folders.map(folder => checkedMigrationsDir(folder, 'run')) : shippedAppMigrationsDirs()
}
