import net from 'node:net'
import { Redis } from 'ioredis'
import postgres from 'postgres'
import { afterAll, describe, expect, it } from 'vitest'
import { startRedisServer, type TestRedisServer } from '../support/redis-server'
import { createTestDatabase, describeWithServices, postgresAdminUrl } from '../support/services'

// Self-test of the e2e harness itself, independent of the app: if these fail, app suites cannot be trusted.

async function ping(url: string): Promise<string> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  try {
    await client.connect()
    return await client.ping()
  }
  finally {
    client.disconnect()
  }
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', () => resolve(true))
  })
}

describe('test-owned redis-server', () => {
  let redis: TestRedisServer | undefined
  afterAll(async () => { await redis?.stop() })

  it('starts, stops and comes back empty on the same port', async () => {
    redis = await startRedisServer()
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`)
    expect(await ping(redis.url)).toBe('PONG')

    const writer = new Redis(redis.url)
    await writer.set('harness:key', 'before restart')
    writer.disconnect()

    await redis.stop()
    expect(await refusesConnections(redis.port)).toBe(true)
    await redis.stop() // idempotent

    await redis.start()
    expect(await ping(redis.url)).toBe('PONG')
    const reader = new Redis(redis.url)
    expect(await reader.get('harness:key')).toBeNull()
    reader.disconnect()
  })
})

describeWithServices('test databases', ['postgres'], () => {
  it('creates a database that can be used, then drops it', async () => {
    const database = await createTestDatabase('harness')
    const name = new URL(database.url).pathname.slice(1)

    const sql = postgres(database.url, { max: 1, onnotice: () => {} })
    const [row] = await sql<{ current: string }[]>`select current_database() as current`
    await sql.end()
    expect(row?.current).toBe(name)

    await database.drop()
    const admin = postgres(postgresAdminUrl, { max: 1 })
    const remaining = await admin`select 1 from pg_database where datname = ${name}`
    await admin.end()
    expect(remaining).toHaveLength(0)
  })
})
