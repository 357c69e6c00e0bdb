import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { appEnv, startApp, stopAll } from '../support/app'
import { createTenant } from '../support/http'
import { newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { spawnManaged } from '../support/processes'
import { serverEntry } from '../support/build-once'

// Log lines are buffered and written together, not one write each: none may be lost on the way out.
// A clean SIGTERM right after a burst of requests must leave every one of their lines in the output
// as a whole JSON line; so must a start-up that fails and exits.

const REQUESTS = 300
const CONCURRENCY = 10

/** The output's lines that are not the server's listening banner, each parsed (a line that is not JSON fails). */
function jsonLines(output: string): Array<Record<string, unknown>> {
  return output.split('\n')
    .filter(line => line !== '' && !/^Listening on http:\/\/127\.0\.0\.1:\d+$/.test(line))
    .map(line => JSON.parse(line) as Record<string, unknown>)
}

describeWithServices('log lines on the way out', ['postgres', 'redis'], () => {
  let dropDatabase: (() => Promise<void>) | undefined
  let databaseUrl: string

  beforeAll(async () => {
    const database = await createTestDatabase('log_flush')
    dropDatabase = database.drop
    databaseUrl = database.url
  })

  afterAll(async () => {
    await stopAll()
    await dropDatabase?.()
  })

  it(`SIGTERM right after ${REQUESTS} requests: each one's info line is in stdout, whole and parseable`, async () => {
    const app = await startApp({ databaseUrl, redisUrl, label: 'log-flush', env: { LOG_LEVEL: 'info' } })
    const tenant: TenantCredentials = await createTenant(app.url, 'log flush tenant')
    const clientRequestIds = Array.from({ length: REQUESTS }, () => `log-flush-${randomUUID()}`)
    for (let first = 0; first < REQUESTS; first += CONCURRENCY) {
      await Promise.all(clientRequestIds.slice(first, first + CONCURRENCY).map(async (clientRequestId) => {
        const response = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody(), headers: { 'x-request-id': clientRequestId } })
        expect(response.status, response.text).toBe(201)
      }))
    }
    await app.stop()
    expect(await app.exited).toBe(0)

    const lines = jsonLines(app.output())
    const logged = new Set(lines.filter(line => line.msg === 'request').map(line => line.clientRequestId))
    expect(clientRequestIds.filter(id => !logged.has(id))).toEqual([])
  })

  it('a start-up that fails and exits still writes what it logged first (its warnings)', async () => {
    // Nothing listens on port 1: the database cannot be opened, and start-up exits with code 1 after
    // logging the warnings of the unsafe settings the test environment turns on (FAULTS_ENABLED).
    const failed = spawnManaged({
      label: 'log-flush-failed-start',
      args: [serverEntry],
      env: { ...appEnv({ databaseUrl: 'postgres://root@127.0.0.1:1/none', env: { LOG_LEVEL: 'info' } }), PORT: '0' },
    })
    expect(await failed.exited).toBe(1)
    const lines = failed.output().split('\n').filter(line => line.startsWith('{')).map(line => JSON.parse(line) as Record<string, unknown>)
    expect(lines).toContainEqual(expect.objectContaining({ level: 'warn', msg: 'FAULTS_ENABLED is on: unsafe in production' }))
  })
})
