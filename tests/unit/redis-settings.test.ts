import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Cluster, Redis } from 'ioredis'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { ConfigError, parseConfig } from '../../server/config'
import { createRedisConnection, type RedisConnection, type RedisSettings, redisTopology } from '../../server/redis'

// The Redis settings that only make sense together, checked when the connection is made (start-up),
// and the client each topology gets. Nothing connects here: every client is lazy.

const none: RedisSettings = { REDIS_TLS: false, REDIS_KEY_PREFIX: 'ic:' }
const folder = mkdtempSync(join(tmpdir(), 'redis-settings-'))
const caFile = join(folder, 'ca.pem')
writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\nnot checked until a handshake\n-----END CERTIFICATE-----\n')

const opened: RedisConnection[] = []
function open(settings: Partial<RedisSettings>): RedisConnection {
  const connection = createRedisConnection({ ...none, ...settings }, { lazyConnect: true })
  if (!connection) throw new Error('expected a connection')
  opened.push(connection)
  return connection
}

afterEach(() => {
  for (const connection of opened.splice(0)) connection.client.disconnect()
})

afterAll(() => {
  rmSync(folder, { recursive: true, force: true })
})

describe('redisTopology', () => {
  it('names the topology from the one setting given, or none', () => {
    expect(redisTopology(none)).toBeUndefined()
    expect(redisTopology({ ...none, REDIS_URL: 'redis://cache:6379' })).toBe('standalone')
    expect(redisTopology({ ...none, REDIS_CLUSTER_NODES: 'a:7000,b:7001' })).toBe('cluster')
    expect(redisTopology({ ...none, REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_NAME: 'mymaster' })).toBe('sentinel')
  })

  it.each([
    [{ REDIS_URL: 'redis://cache:6379', REDIS_CLUSTER_NODES: 'a:7000' }, /only one of REDIS_URL.*REDIS_URL and REDIS_CLUSTER_NODES are all set/],
    [{ REDIS_CLUSTER_NODES: 'a:7000', REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_NAME: 'mymaster' }, /REDIS_CLUSTER_NODES and REDIS_SENTINELS/],
    [{ REDIS_SENTINELS: 's:26379' }, /REDIS_SENTINELS needs REDIS_SENTINEL_NAME/],
    [{ REDIS_SENTINEL_NAME: 'mymaster' }, /REDIS_SENTINEL_NAME: is set without REDIS_SENTINELS/],
    [{ REDIS_PASSWORD: 'secret' }, /REDIS_PASSWORD: is set without REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS/],
    [{ REDIS_TLS: true, REDIS_CA_FILE: caFile }, /REDIS_TLS: is set without .*\n {2}REDIS_CA_FILE: is set without/],
    [{ REDIS_URL: 'redis://cache:6379', REDIS_CA_FILE: caFile }, /REDIS_CA_FILE: is set but TLS is off/],
  ] as Array<[Partial<RedisSettings>, RegExp]>)('refuses %o', (settings, message) => {
    expect(() => redisTopology({ ...none, ...settings })).toThrow(ConfigError)
    expect(() => redisTopology({ ...none, ...settings })).toThrow(message)
  })

  it('takes the settings as the configuration parses them from the environment', () => {
    const config = parseConfig({ REDIS_SENTINELS: '10.0.0.1:26379,10.0.0.2:26379', REDIS_SENTINEL_NAME: 'checkout', REDIS_TLS: 'true', REDIS_PASSWORD: 'pw' })
    expect(redisTopology(config)).toBe('sentinel')
  })

  it('is checked by the configuration itself: one start lists every Redis problem with the rest', () => {
    let error: unknown
    try {
      parseConfig({ REDIS_URL: 'redis://cache:6379', REDIS_SENTINELS: '10.0.0.1:26379', REDIS_CA_FILE: '/nonexistent/ca.pem', PORT: 'x' })
    }
    catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).problems.map(problem => problem.name)).toEqual(['PORT', 'REDIS_SENTINELS', 'REDIS_SENTINEL_NAME', 'REDIS_CA_FILE', 'REDIS_CA_FILE'])
    expect((error as ConfigError).message).toMatch(/REDIS_CA_FILE: cannot be read \(ENOENT\): \/nonexistent\/ca\.pem/)
    expect((error as ConfigError).message).toMatch(/REDIS_CA_FILE: is set but TLS is off/)
  })
})

describe('createRedisConnection', () => {
  it('is undefined without Redis', () => {
    expect(createRedisConnection(none)).toBeUndefined()
  })

  it('one node: fail-fast options, the key prefix, credentials where the URL has none', () => {
    const { topology, client } = open({ REDIS_URL: 'redis://cache.internal:6380/2', REDIS_KEY_PREFIX: 'shop:', REDIS_USERNAME: 'app', REDIS_PASSWORD: 'pw' })
    expect(topology).toBe('standalone')
    const options = (client as Redis).options
    expect(options).toMatchObject({ host: 'cache.internal', port: 6380, db: 2, keyPrefix: 'shop:', username: 'app', password: 'pw', enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 500, connectTimeout: 1000 })
    expect(options.tls).toBeUndefined()
    expect(options.reconnectOnError!(new Error('READONLY You can\'t write against a read only replica.'))).toBe(true)
    expect(options.reconnectOnError!(new Error('ERR syntax error'))).toBe(false)
  })

  it('rediss:// verifies the certificate, against REDIS_CA_FILE when set; the URL\'s credentials win', () => {
    const plain = (open({ REDIS_URL: 'rediss://:fromurl@cache.internal:6380', REDIS_PASSWORD: 'fromsetting' }).client as Redis).options
    expect(plain.tls).toEqual({})
    expect(plain.password).toBe('fromurl')
    const withCa = (open({ REDIS_URL: 'rediss://cache.internal:6380', REDIS_CA_FILE: caFile }).client as Redis).options
    expect(Buffer.isBuffer(withCa.tls?.ca)).toBe(true)
    expect(withCa.tls?.rejectUnauthorized).not.toBe(false)
  })

  it('an unreadable REDIS_CA_FILE stops start-up naming the file', () => {
    expect(() => createRedisConnection({ ...none, REDIS_URL: 'rediss://cache:6380', REDIS_CA_FILE: join(folder, 'missing.pem') }))
      .toThrow(/cannot read REDIS_CA_FILE .*missing\.pem/)
  })

  it('cluster: the nodes, the prefix on the cluster, no offline queue, bounded redirections, fail-fast nodes with TLS and credentials', () => {
    const { topology, client } = open({ REDIS_CLUSTER_NODES: 'node-a:7000,node-b:7001', REDIS_KEY_PREFIX: 'shop:', REDIS_TLS: true, REDIS_CA_FILE: caFile, REDIS_PASSWORD: 'pw' })
    expect(topology).toBe('cluster')
    const cluster = client as Cluster
    expect(cluster.isCluster).toBe(true)
    expect((cluster as unknown as { startupNodes: unknown }).startupNodes).toEqual([{ host: 'node-a', port: 7000 }, { host: 'node-b', port: 7001 }])
    expect(cluster.options).toMatchObject({ keyPrefix: 'shop:', enableOfflineQueue: false, maxRedirections: 4, slotsRefreshInterval: 5000 })
    expect(cluster.options.redisOptions).toMatchObject({ password: 'pw', commandTimeout: 500, connectTimeout: 1000, maxRetriesPerRequest: 1 })
    expect(Buffer.isBuffer(cluster.options.redisOptions?.tls?.ca)).toBe(true)
  })

  it('sentinel: the sentinels and the name, following failovers, TLS to the master and the sentinels', () => {
    const { topology, client } = open({ REDIS_SENTINELS: 's1:26379,s2:26380', REDIS_SENTINEL_NAME: 'checkout', REDIS_TLS: true })
    expect(topology).toBe('sentinel')
    expect((client as Redis).options).toMatchObject({
      sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26380 }],
      name: 'checkout',
      failoverDetector: true,
      enableTLSForSentinelMode: true,
      tls: {},
      sentinelTLS: {},
      enableOfflineQueue: false,
      commandTimeout: 500,
      sentinelCommandTimeout: 500,
    })
  })
})
