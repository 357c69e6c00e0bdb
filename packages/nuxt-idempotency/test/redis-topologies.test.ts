import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { setup, useTestContext } from '@nuxt/test-utils/e2e'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { command, type Reply, startRedisCluster, startRedisSentinel } from './support/redis-topology-servers.mjs'
import { executionsOnAll, send } from './support/http'
import { type Instance, startInstance, waitUntilReady } from './support/instances'
import { expectExecuted, expectOneExecution, expectProblem, expectReplayOf, SETUP_TIMEOUT_MS, subscriptionsFixture } from './support/key-contract'
import { fixtureBuildDir, missingServices, testDatabase } from './support/services'

/**
 * The module on the other Redis topologies, set by the environment alone as a deployment sets it:
 * a Redis Cluster (REDIS_CLUSTER_NODES) and a master behind Sentinel (REDIS_SENTINELS,
 * REDIS_SENTINEL_NAME). Two instances of one build race one key; the shared replays are in that Redis.
 */

interface Topology {
  env: Record<string, string>
  /** The ports of the servers that hold keys now (the cluster's masters, Sentinel's master). */
  dataPorts: () => Promise<number[]>
  stop: () => Promise<void>
}

const topologies: Record<string, () => Promise<Topology>> = {
  'a Redis Cluster': async () => {
    const cluster = await startRedisCluster()
    return { env: { REDIS_CLUSTER_NODES: cluster.nodesSetting }, dataPorts: cluster.masterPorts, stop: cluster.stop }
  },
  'a master behind Sentinel': async () => {
    const sentinel = await startRedisSentinel()
    return {
      env: { REDIS_SENTINELS: sentinel.sentinelsSetting, REDIS_SENTINEL_NAME: sentinel.name },
      dataPorts: async () => [(await sentinel.masterAddress()).port],
      stop: sentinel.stop,
    }
  },
}

const keyCount = (reply: Reply) => (Array.isArray(reply) ? reply.length : 0)

const missing = await missingServices()

describe.skipIf(missing.length > 0)('the module on other Redis topologies', async () => {
  // Built once by the test utilities; each topology starts its own servers of that build.
  await setup({
    rootDir: subscriptionsFixture,
    buildDir: fixtureBuildDir('subscriptions-redis-topologies'),
    build: true,
    server: false,
    setupTimeout: SETUP_TIMEOUT_MS,
  })
  let entry: string
  beforeAll(() => {
    // Where the test utilities had Nitro write the build (`nitro.output.dir` under the build directory).
    const { nitro } = useTestContext().nuxt!.options as unknown as { nitro: { output: { dir: string } } }
    entry = join(nitro.output.dir, 'server/index.mjs')
  })

  describe.each(Object.keys(topologies))('%s', (name) => {
    const database = testDatabase(`redis_topology_${name}`)
    const instances: Instance[] = []
    let topology: Topology
    const prefix = `test:${randomUUID()}:`

    beforeAll(async () => {
      await database.create()
      topology = await topologies[name]!()
      // No REDIS_URL (it would win): the topology's own settings choose the connection.
      const env = { NODE_ENV: 'production', DATABASE_URL: database.url, REDIS_URL: '', ...topology.env, NUXT_IDEMPOTENCY_KEY_PREFIX: prefix }
      instances.push(...await Promise.all([startInstance(entry, env), startInstance(entry, env)]))
      await Promise.all(instances.map(instance => waitUntilReady(instance, '/api/ready')))
    }, 120_000)

    afterAll(async () => {
      await Promise.all(instances.map(instance => instance.stop()))
      await topology?.stop()
      await database.drop()
    }, 60_000)

    const totalExecutions = (route: string, key: string) => executionsOnAll(instances.map(instance => instance.url), route, key)

    it('executes one key once when 10 copies race across both instances; replays on either; another body is 422; the replays are kept in that Redis', async () => {
      const key = randomUUID()
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send(`${instances[i % 2]!.url}/api/slow`, { key, body: { plan: 'pro' } })))
      const executed = expectOneExecution(answers)
      expectExecuted(executed)
      for (const instance of instances) expectReplayOf(await send(`${instance.url}/api/slow`, { key, body: { plan: 'pro' } }), executed)
      expectProblem(await send(`${instances[1]!.url}/api/slow`, { key, body: { plan: 'team' } }), 422, 'idempotency-key-reused')
      expect(await totalExecutions('slow', key)).toBe(1)
      // The shared replay tier wrote the finished response to the topology's servers (written off the response path).
      let stored = 0
      for (let attempt = 0; attempt < 50 && stored === 0; attempt++) {
        const replies = await Promise.all((await topology.dataPorts()).map(port => command(port, ['KEYS', 'idempotency:replay*'])))
        stored = replies.reduce<number>((sum, reply) => sum + keyCount(reply), 0)
        if (stored === 0) await new Promise(resolve => setTimeout(resolve, 100))
      }
      expect(stored).toBeGreaterThan(0)
    })
  })
})
