import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import { Redis, ReplyError } from 'ioredis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createMemoryLocks, createRedisLocks } from 'nuxt-idempotency/core'
import { createRedisConnection } from '../../server/redis'
import { LockBackendError, type Locks } from 'nuxt-idempotency/core'
import { type RedisTopologyLocks, startClusterLocks, startSentinelLocks } from '../support/lock-backends'
import { pollUntil } from '../support/poll'
import { clusterEnv, command, connectRedisTopology, describeWithRedisServer, keysByNode, type RedisClusterProcesses, redisHasTls, type RedisSentinelProcesses, startRedisCluster, startTlsRedis, type TestRedisConnection, type TlsRedisProcess } from '../support/redis-topologies'
import { connectTestRedis, describeWithServices, freePort } from '../support/services'

const SHORT_TTL_MS = 150
const PAST_SHORT_TTL_MS = 300
const LONG_TTL_MS = 10_000

/** The behaviour every Locks implementation must share; `createLocks` runs once per test. */
function lockContract(createLocks: () => Locks) {
  let locks: Locks
  let keyCounter = 0
  // A fresh key per test, so a lock left to expire in one test cannot leak into the next (nor into
  // another run of the contract on the same connection).
  const run = randomUUID().slice(0, 8)
  let key: string

  beforeEach(() => {
    locks = createLocks()
    key = `contract-lock-${run}-${++keyCounter}`
  })

  afterEach(async () => {
    await locks.close()
  })

  it('acquire returns a non-empty owner token', async () => {
    const token = await locks.acquire(key, LONG_TTL_MS)
    expect(typeof token).toBe('string')
    expect(token).not.toBe('')
  })

  it('a second acquire of a held key returns null', async () => {
    expect(await locks.acquire(key, LONG_TTL_MS)).not.toBeNull()
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
  })

  it('different keys are independent', async () => {
    const first = await locks.acquire(`${key}:a`, LONG_TTL_MS)
    const second = await locks.acquire(`${key}:b`, LONG_TTL_MS)
    expect(first).not.toBeNull()
    expect(second).not.toBeNull()
    expect(second).not.toBe(first)
  })

  it('release with a wrong token returns false and the key stays held', async () => {
    const token = await locks.acquire(key, LONG_TTL_MS)
    expect(await locks.release(key, `${token}-not-the-owner`)).toBe(false)
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
  })

  it('acquireTagged takes a free key and answers the holder\'s tag while it is held', async () => {
    const first = await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-a')
    expect(first).toEqual({ acquired: true, token: expect.any(String) })
    expect(await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-b')).toEqual({ acquired: false, holderTag: 'fingerprint-a' })
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
  })

  it('a tagged lock is extended and released by its owner token only, and keeps its tag when extended', async () => {
    const taken = await locks.acquireTagged(key, SHORT_TTL_MS, 'fingerprint-a')
    if (!taken.acquired) throw new Error('expected the lock')
    expect(await locks.extend(key, `${taken.token}-x`, LONG_TTL_MS)).toBe(false)
    expect(await locks.release(key, taken.token.slice(0, -1))).toBe(false)
    expect(await locks.extend(key, taken.token, LONG_TTL_MS)).toBe(true)
    await delay(PAST_SHORT_TTL_MS)
    expect(await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-b')).toEqual({ acquired: false, holderTag: 'fingerprint-a' })
    expect(await locks.release(key, taken.token)).toBe(true)
    expect((await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-b')).acquired).toBe(true)
  })

  it('a tagged lock expires after its ttl; an untagged holder is answered without a tag', async () => {
    expect((await locks.acquireTagged(key, SHORT_TTL_MS, 'fingerprint-a')).acquired).toBe(true)
    await delay(PAST_SHORT_TTL_MS)
    expect(await locks.acquire(key, LONG_TTL_MS)).not.toBeNull()
    expect(await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-b')).toEqual({ acquired: false, holderTag: undefined })
  })

  it('release by the owner returns true and the key can be acquired again', async () => {
    const token = await locks.acquire(key, LONG_TTL_MS)
    expect(await locks.release(key, token!)).toBe(true)
    const next = await locks.acquire(key, LONG_TTL_MS)
    expect(next).not.toBeNull()
    expect(next).not.toBe(token)
  })

  it('a lock whose ttl passed can be acquired without a release', async () => {
    expect(await locks.acquire(key, SHORT_TTL_MS)).not.toBeNull()
    await delay(PAST_SHORT_TTL_MS)
    expect(await locks.acquire(key, LONG_TTL_MS)).not.toBeNull()
  })

  it('extend by the owner keeps the lock past its original ttl', async () => {
    const token = await locks.acquire(key, SHORT_TTL_MS)
    await delay(100)
    expect(await locks.extend(key, token!, 400)).toBe(true)
    await delay(150) // 250 ms after acquire: past the original ttl, inside the extended one
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
    expect(await locks.release(key, token!)).toBe(true)
  })

  it('extend with a wrong token returns false', async () => {
    const token = await locks.acquire(key, LONG_TTL_MS)
    expect(await locks.extend(key, `${token}-not-the-owner`, LONG_TTL_MS)).toBe(false)
    expect(await locks.release(key, token!)).toBe(true)
  })

  it('extend after expiry and re-acquisition by someone else returns false and steals nothing', async () => {
    const expiredToken = await locks.acquire(key, SHORT_TTL_MS)
    await delay(PAST_SHORT_TTL_MS)
    const newOwnerToken = await locks.acquire(key, LONG_TTL_MS)
    expect(newOwnerToken).not.toBeNull()
    expect(await locks.extend(key, expiredToken!, LONG_TTL_MS)).toBe(false)
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
    expect(await locks.release(key, newOwnerToken!)).toBe(true)
  })

  it('release after expiry and re-acquisition by someone else returns false and keeps the new owner', async () => {
    const expiredToken = await locks.acquire(key, SHORT_TTL_MS)
    await delay(PAST_SHORT_TTL_MS)
    const newOwnerToken = await locks.acquire(key, LONG_TTL_MS)
    expect(newOwnerToken).not.toBeNull()
    expect(await locks.release(key, expiredToken!)).toBe(false)
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
    expect(await locks.release(key, newOwnerToken!)).toBe(true)
  })

  it('50 concurrent acquires of one key yield exactly one token', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, () => locks.acquire(key, LONG_TTL_MS)))
    expect(results.filter(token => token !== null)).toHaveLength(1)
    expect(results.filter(token => token === null)).toHaveLength(49)
  })

  it('waitForRelease resolves true immediately on a free key', async () => {
    const startedAt = performance.now()
    expect(await locks.waitForRelease(key, 5_000)).toBe(true)
    expect(performance.now() - startedAt).toBeLessThan(500)
  })

  it('waitForRelease resolves true soon after the owner releases, not before', async () => {
    const token = await locks.acquire(key, LONG_TTL_MS)
    let resolvedAt: number | undefined
    const waiting = locks.waitForRelease(key, 5_000).then((released) => {
      resolvedAt = performance.now()
      return released
    })
    await delay(200)
    expect(resolvedAt).toBeUndefined()
    const releaseStartedAt = performance.now()
    expect(await locks.release(key, token!)).toBe(true)
    expect(await waiting).toBe(true)
    expect(resolvedAt! - releaseStartedAt).toBeGreaterThanOrEqual(0)
    expect(resolvedAt! - releaseStartedAt).toBeLessThan(500)
  })

  it('waitForRelease resolves true once the lock expires', async () => {
    expect(await locks.acquire(key, SHORT_TTL_MS)).not.toBeNull()
    const startedAt = performance.now()
    expect(await locks.waitForRelease(key, 5_000)).toBe(true)
    const waitedMs = performance.now() - startedAt
    expect(waitedMs).toBeGreaterThanOrEqual(SHORT_TTL_MS - 50) // minus the acquire round trip
    expect(waitedMs).toBeLessThan(SHORT_TTL_MS + 500)
  })

  it('waitForRelease resolves false on timeout while the key is still held', async () => {
    const token = await locks.acquire(key, LONG_TTL_MS)
    const startedAt = performance.now()
    expect(await locks.waitForRelease(key, 200)).toBe(false)
    const waitedMs = performance.now() - startedAt
    expect(waitedMs).toBeGreaterThanOrEqual(190) // timers may fire a hair early against performance.now()
    expect(waitedMs).toBeLessThan(1_000)
    expect(await locks.acquire(key, LONG_TTL_MS)).toBeNull()
    expect(await locks.release(key, token!)).toBe(true)
  })

  it('close resolves pending waitForRelease calls with false', async () => {
    expect(await locks.acquire(key, LONG_TTL_MS)).not.toBeNull()
    const startedAt = performance.now()
    const waiting = locks.waitForRelease(key, 5_000)
    await delay(50)
    await locks.close()
    expect(await waiting).toBe(false)
    expect(performance.now() - startedAt).toBeLessThan(1_000)
  })
}

describe('memory locks', () => {
  lockContract(() => createMemoryLocks())
})

describeWithServices('redis locks', ['redis'], () => {
  let redis: Redis

  beforeAll(async () => {
    redis = await connectTestRedis('locks contract')
  })

  afterAll(async () => {
    await redis?.quit()
  })

  lockContract(() => createRedisLocks(redis))
})

// Needs no running Redis: the point is a server that is not there.
describe('redis locks with an unreachable server', () => {
  let redis: Redis
  let locks: Locks

  beforeAll(async () => {
    redis = new Redis({
      host: '127.0.0.1',
      port: await freePort(),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 300,
      commandTimeout: 300,
      retryStrategy: () => null,
    })
    // The failure must reach callers as LockBackendError, not as an unhandled 'error' event.
    redis.on('error', () => {})
    locks = createRedisLocks(redis)
  })

  afterAll(async () => {
    await locks.close()
    redis.disconnect()
  })

  async function expectBackendError(operation: () => Promise<unknown>) {
    const startedAt = performance.now()
    const error = await operation().then(() => undefined, (failure: unknown) => failure)
    expect(performance.now() - startedAt).toBeLessThan(2_000)
    expect(error).toBeInstanceOf(LockBackendError)
    expect((error as LockBackendError).cause).toBeInstanceOf(Error)
  }

  it('acquire rejects with LockBackendError', async () => {
    await expectBackendError(() => locks.acquire('lock', LONG_TTL_MS))
  })

  it('extend rejects with LockBackendError', async () => {
    await expectBackendError(() => locks.extend('lock', 'token', LONG_TTL_MS))
  })

  it('release rejects with LockBackendError', async () => {
    await expectBackendError(() => locks.release('lock', 'token'))
  })

  it('waitForRelease rejects with LockBackendError', async () => {
    await expectBackendError(() => locks.waitForRelease('lock', 5_000))
  })
})

/**
 * The test server behind a stand-in that answers SET … NX GET its own way (everything else passes
 * through): `refuse` as Redis before 7 does (an ERR reply), `fail` as a lost connection does, `pass`.
 */
function setNxGetStandIn(redis: Redis, answer: () => 'refuse' | 'fail' | 'pass'): Redis & { setNxGets: number } {
  const counts = { setNxGets: 0 }
  return new Proxy(redis, {
    get(target, property) {
      if (property === 'setNxGets') return counts.setNxGets
      if (property !== 'call') return Reflect.get(target, property, target)
      return (...args: Array<string | number>) => {
        const isSetNxGet = String(args[0]).toLowerCase() === 'set' && args.includes('NX') && args.includes('GET')
        if (!isSetNxGet) return target.call(String(args[0]), ...args.slice(1))
        counts.setNxGets += 1
        const how = answer()
        if (how === 'refuse') return Promise.reject(new ReplyError('ERR syntax error'))
        if (how === 'fail') return Promise.reject(new Error('Connection is closed.'))
        return target.call('set', ...args.slice(1))
      }
    },
  }) as Redis & { setNxGets: number }
}

describeWithServices('redis locks, tagged acquire by script (forced)', ['redis'], () => {
  let redis: Redis
  let standIn: Redis & { setNxGets: number }

  beforeAll(async () => {
    redis = await connectTestRedis('locks script')
    // Sending SET … NX GET at all would fail the contract's tagged tests.
    standIn = setNxGetStandIn(redis, () => 'fail')
  })

  afterAll(async () => {
    await redis?.quit()
  })

  lockContract(() => createRedisLocks(standIn, { taggedAcquire: 'script' }))

  it('never sends SET … NX GET', () => {
    expect(standIn.setNxGets).toBe(0)
  })
})

describeWithServices('redis locks on a server that refuses SET … NX GET', ['redis'], () => {
  let redis: Redis
  let fallbacks: Error[]

  beforeAll(async () => {
    redis = await connectTestRedis('locks refused')
  })

  beforeEach(() => {
    fallbacks = []
  })

  afterAll(async () => {
    await redis?.quit()
  })

  lockContract(() => createRedisLocks(setNxGetStandIn(redis, () => 'refuse'), { onTaggedFallback: refusal => fallbacks.push(refusal) }))

  it('asks once, then takes tagged locks with the script for good', async () => {
    const standIn = setNxGetStandIn(redis, () => 'refuse')
    const locks = createRedisLocks(standIn, { onTaggedFallback: refusal => fallbacks.push(refusal) })
    const key = `refused-${randomUUID()}`
    const first = await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-a')
    expect(first.acquired).toBe(true)
    expect(await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-b')).toEqual({ acquired: false, holderTag: 'fingerprint-a' })
    expect((await locks.acquireTagged(`${key}-2`, LONG_TTL_MS, 'fingerprint-c')).acquired).toBe(true)
    expect(standIn.setNxGets).toBe(1)
    expect(fallbacks.map(refusal => refusal.message)).toEqual(['ERR syntax error'])
    if (first.acquired) expect(await locks.release(key, first.token)).toBe(true)
    await locks.close()
  })

  it('a failure to reach Redis is a LockBackendError, not a refusal: SET … NX GET is tried again next time', async () => {
    let answer: 'fail' | 'pass' = 'fail'
    const standIn = setNxGetStandIn(redis, () => answer)
    const locks = createRedisLocks(standIn, { onTaggedFallback: refusal => fallbacks.push(refusal) })
    const key = `unreachable-${randomUUID()}`
    await expect(locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-a')).rejects.toBeInstanceOf(LockBackendError)
    answer = 'pass'
    expect((await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-a')).acquired).toBe(true)
    expect(standIn.setNxGets).toBe(2)
    expect(fallbacks).toEqual([])
    await locks.close()
  })
})

describeWithRedisServer('redis locks on a Redis Cluster of 3 masters', () => {
  let topology: RedisTopologyLocks<RedisClusterProcesses>

  beforeAll(async () => {
    topology = await startClusterLocks('locks cluster')
  })

  afterAll(async () => {
    await topology?.close()
  })

  lockContract(() => topology.newLocks())

  describe('with the SET … NX GET fallback forced', () => {
    lockContract(() => topology.newLocks({ taggedAcquire: 'script' }))
  })

  it('spreads lock keys over every master, each key whole on one', async () => {
    const locks = topology.newLocks()
    const keys = Array.from({ length: 30 }, (_, index) => `spread-${index}`)
    for (const key of keys) expect((await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint')).acquired).toBe(true)
    const byNode = await keysByNode(topology.servers.ports, `${topology.connection.prefix}spread-*`)
    expect([...byNode.values()].map(found => found.length > 0)).toEqual([true, true, true])
    expect([...byNode.values()].flat().sort()).toEqual(keys.map(key => `${topology.connection.prefix}${key}`).sort())
    await locks.close()
  })

  it('follows a live resharding (MOVED): a held lock moves with its slot and stays its owner\'s', async () => {
    const { servers, connection } = topology
    const locks = topology.newLocks()
    const key = `moved-${randomUUID()}`
    const taken = await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-a')
    if (!taken.acquired) throw new Error('expected the lock')
    const slot = await servers.keySlot(`${connection.prefix}${key}`)
    const from = await servers.ownerOfSlot(slot)
    const to = servers.ports.find(port => port !== from)!
    await servers.moveSlot(slot, to)
    expect(await command(to, ['EXISTS', `${connection.prefix}${key}`])).toBe(1)

    // The client's slot map still names the old master: it is answered MOVED and follows.
    expect(await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint-b')).toEqual({ acquired: false, holderTag: 'fingerprint-a' })
    expect(await locks.extend(key, taken.token, LONG_TTL_MS)).toBe(true)
    expect(await locks.release(key, taken.token)).toBe(true)
    expect(await command(to, ['EXISTS', `${connection.prefix}${key}`])).toBe(0)
    await locks.close()
  })
})

describeWithRedisServer('redis locks on a Redis Cluster of 3 masters with a replica each, when a master dies', () => {
  let cluster: RedisClusterProcesses
  let connection: TestRedisConnection

  beforeAll(async () => {
    cluster = await startRedisCluster({ replicas: 1 })
    connection = await connectRedisTopology(clusterEnv(cluster), 'locks cluster failover')
  })

  afterAll(async () => {
    await connection?.close()
    await cluster?.stop()
  })

  it('every lock call answers or fails fast with LockBackendError while its replica takes over; then locks of its slots live on the promoted replica', async () => {
    const locks = createRedisLocks(connection.client)
    const key = `cluster-failover-${randomUUID()}`
    const slot = await cluster.keySlot(`${connection.prefix}${key}`)
    const victim = await cluster.ownerOfSlot(slot)
    const calls: Array<{ ms: number, ok: boolean }> = []
    let running = true
    const load = (async () => {
      for (let index = 0; running; index++) {
        const started = performance.now()
        const ok = await locks.acquireTagged(`${key}-${index}`, LONG_TTL_MS, 'fingerprint').then(() => true, (error: unknown) => {
          expect(error).toBeInstanceOf(LockBackendError)
          return false
        })
        calls.push({ ms: performance.now() - started, ok })
        await delay(5)
      }
    })()
    await delay(200)
    await cluster.kill(victim)
    await cluster.untilHealthy()
    const promoted = await cluster.ownerOfSlot(slot)
    await pollUntil(`a lock of slot ${slot} is taken on its promoted replica (127.0.0.1:${promoted})`, async () => {
      const taken = await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint').catch(() => undefined)
      return taken?.acquired === true && await command(promoted, ['EXISTS', `${connection.prefix}${key}`]) === 1
    }, { timeoutMs: 10_000, intervalMs: 100 })
    running = false
    await load

    const slowest = Math.max(...calls.map(call => call.ms))
    console.log(`Cluster failover 127.0.0.1:${victim} → ${promoted}: ${calls.length} tagged acquires, ${calls.filter(call => !call.ok).length} failed, slowest ${slowest.toFixed(0)} ms`)
    expect(promoted).not.toBe(victim)
    expect(slowest).toBeLessThan(1_500)
    expect(calls.filter(call => call.ok).length).toBeGreaterThan(0)
    await locks.close()
  })
})

describeWithRedisServer('redis locks behind Sentinel (a master and a replica)', () => {
  let topology: RedisTopologyLocks<RedisSentinelProcesses>

  beforeAll(async () => {
    topology = await startSentinelLocks('locks sentinel')
  })

  afterAll(async () => {
    await topology?.close()
  })

  lockContract(() => topology.newLocks())

  describe('with the SET … NX GET fallback forced', () => {
    lockContract(() => topology.newLocks({ taggedAcquire: 'script' }))
  })

  // Last: the failover leaves the former master a replica.
  it('during a failover every lock call answers or fails fast with LockBackendError; afterwards locks live on the new master', async () => {
    const { servers, connection } = topology
    const locks = topology.newLocks()
    const calls: Array<{ ms: number, ok: boolean }> = []
    let running = true
    const load = (async () => {
      for (let index = 0; running; index++) {
        const started = performance.now()
        const ok = await locks.acquireTagged(`failover-${index}`, LONG_TTL_MS, 'fingerprint').then(() => true, (error: unknown) => {
          expect(error).toBeInstanceOf(LockBackendError)
          return false
        })
        calls.push({ ms: performance.now() - started, ok })
        await delay(5)
      }
    })()
    await delay(200)
    const { from, to } = await servers.failover()
    // Locks go to the promoted replica now, not to the former master (still a master for some seconds).
    let key = ''
    await pollUntil(`a lock is taken on the new master (127.0.0.1:${to})`, async () => {
      key = `after-failover-${randomUUID()}`
      const taken = await locks.acquireTagged(key, LONG_TTL_MS, 'fingerprint').catch(() => undefined)
      return taken?.acquired === true && await command(to, ['EXISTS', `${connection.prefix}${key}`]) === 1
    }, { timeoutMs: 10_000, intervalMs: 100 })
    expect(await command(from, ['EXISTS', `${connection.prefix}${key}`])).toBe(0)
    running = false
    await load

    const slowest = Math.max(...calls.map(call => call.ms))
    console.log(`Sentinel failover 127.0.0.1:${from} → ${to}: ${calls.length} tagged acquires, ${calls.filter(call => !call.ok).length} failed, slowest ${slowest.toFixed(0)} ms`)
    expect(slowest).toBeLessThan(1_500)
    expect(calls.filter(call => call.ok).length).toBeGreaterThan(0)
    await locks.close()
  })
})

describeWithRedisServer('redis locks over TLS (rediss://, REDIS_CA_FILE)', async () => {
  let server: TlsRedisProcess
  let connection: TestRedisConnection

  // Debian's redis-server is built with TLS; a build without it skips this suite.
  describe.skipIf(!(await redisHasTls()))('a Redis that listens only for TLS', () => {
    beforeAll(async () => {
      server = await startTlsRedis()
      connection = await connectRedisTopology({ REDIS_URL: server.url, REDIS_CA_FILE: server.caFile }, 'locks tls')
    })

    afterAll(async () => {
      await connection?.close()
      await server?.stop()
    })

    lockContract(() => createRedisLocks(connection.client))

    /** The error the connection reports when it cannot be made (connect() itself only says it closed). */
    async function refusal(env: { REDIS_URL: string, REDIS_CA_FILE?: string }): Promise<Error | undefined> {
      const attempt = createRedisConnection({ ...env, REDIS_TLS: false, REDIS_KEY_PREFIX: 'tls:' }, { lazyConnect: true })!
      const errors: Error[] = []
      attempt.client.on('error', (error: Error) => errors.push(error))
      const connected = await attempt.client.connect().then(() => true, () => false)
      attempt.client.disconnect()
      return connected ? undefined : errors[0]
    }

    it('its certificate is verified: without REDIS_CA_FILE (a CA nobody trusts) the connection is refused', async () => {
      expect((await refusal({ REDIS_URL: server.url }))?.message).toMatch(/self[- ]signed certificate/i)
    })

    it('the host in the URL must be one the certificate names', async () => {
      const otherName = server.url.replace('127.0.0.1', '127.0.0.2')
      expect((await refusal({ REDIS_URL: otherName, REDIS_CA_FILE: server.caFile }))?.message).toMatch(/IP: 127\.0\.0\.2 is not in the cert's list/)
      expect(await refusal({ REDIS_URL: server.url.replace('127.0.0.1', 'localhost'), REDIS_CA_FILE: server.caFile })).toBeUndefined()
    })
  })
})
