import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { setup, useTestContext } from '@nuxt/test-utils/e2e'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { executionsOnAll, send } from './support/http'
import { type Instance, startInstance, waitUntilReady } from './support/instances'
import { expectExecuted, expectOneExecution, expectProblem, expectReplayOf, SETUP_TIMEOUT_MS, subscriptionsFixture } from './support/key-contract'
import { fixtureBuildDir, missingServices, redisUrl, testDatabase } from './support/services'

/**
 * Two servers of one build on the same Postgres and Redis, as behind a load balancer: one key sent
 * to both at once still executes once.
 */

const missing = await missingServices()
const database = testDatabase('two_instances')

describe.skipIf(missing.length > 0)('two instances on one Postgres and Redis', async () => {
  const instances: Instance[] = []
  beforeAll(database.create, 60_000)
  // Built once by the test utilities; the servers are started below.
  await setup({
    rootDir: subscriptionsFixture,
    buildDir: fixtureBuildDir('subscriptions-two-instances'),
    build: true,
    server: false,
    setupTimeout: SETUP_TIMEOUT_MS,
  })

  beforeAll(async () => {
    // Where the test utilities had Nitro write the build (`nitro.output.dir` under the build directory).
    const { nitro } = useTestContext().nuxt!.options as unknown as { nitro: { output: { dir: string } } }
    const entry = join(nitro.output.dir, 'server/index.mjs')
    const env = {
      NODE_ENV: 'production',
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      NUXT_IDEMPOTENCY_KEY_PREFIX: `test:${randomUUID()}:`,
    }
    // Both at once: their start-up migrations meet on the same fresh database.
    instances.push(...await Promise.all([startInstance(entry, env), startInstance(entry, env)]))
    await Promise.all(instances.map(instance => waitUntilReady(instance, '/api/ready')))
  }, 120_000)

  afterAll(async () => {
    await Promise.all(instances.map(instance => instance.stop()))
    await database.drop()
  }, 60_000)

  const totalExecutions = (route: string, key: string) => executionsOnAll(instances.map(instance => instance.url), route, key)

  it('executes one key once when 10 copies race across both instances, then replays it on either', async () => {
    const key = randomUUID()
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send(`${instances[i % 2]!.url}/api/slow`, { key, body: { plan: 'pro' } })))
    const executed = expectOneExecution(answers)
    expectExecuted(executed)
    expect(await totalExecutions('slow', key)).toBe(1)
    for (const instance of instances) expectReplayOf(await send(`${instance.url}/api/slow`, { key, body: { plan: 'pro' } }), executed)
    expect(await totalExecutions('slow', key)).toBe(1)
  })

  it('refuses on one instance a key the other executed with another body', async () => {
    const key = randomUUID()
    const first = await send(`${instances[0]!.url}/api/subscriptions`, { key, body: { plan: 'pro' } })
    expectExecuted(first)
    expectReplayOf(await send(`${instances[1]!.url}/api/subscriptions`, { key, body: { plan: 'pro' } }), first)
    expectProblem(await send(`${instances[1]!.url}/api/subscriptions`, { key, body: { plan: 'team' } }), 422, 'idempotency-key-reused')
    expect(await totalExecutions('subscriptions', key)).toBe(1)
  })
})
