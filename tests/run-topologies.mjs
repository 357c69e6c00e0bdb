// The contract suites and the multi-instance e2e suites again, once per production topology
// (`npm run test:topologies`): Postgres through PgBouncer in transaction mode without and with a
// direct URL, Redis as a three-master Cluster, and Redis behind Sentinel. Each topology's servers
// are started here (child processes, gone when this exits), and named to the suites through
// TEST_* variables (tests/support/postgres-topology.ts, tests/support/redis-topologies.ts).
// `--report-dir DIR` writes each pass's vitest JSON report to DIR/vitest-topology-<name>.json.
// Exits non-zero when any pass failed. Extra arguments after `--` go to vitest.
import { spawn } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { startPgbouncer } from './support/pgbouncer.mjs'
import { startRedisCluster, startRedisSentinel } from './support/redis-topology-servers.mjs'

const postgresAdminUrl = process.env.TEST_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'

const topologySuites = [
  'tests/integration/idempotency-core.contract.test.ts',
  'tests/integration/worker.contract.test.ts',
  'tests/e2e/storm.test.ts',
  'tests/e2e/orders-api.test.ts',
  'tests/e2e/webhooks-api.test.ts',
]

const pooledEnv = pooler => ({ TEST_PGBOUNCER_URL: `postgres://127.0.0.1:${pooler.port}/postgres` })

/** Each topology: its servers started, the environment that names them to the suites, and how to stop them. */
const topologies = {
  'pgbouncer': async () => {
    const pooler = await startPgbouncer({ serverUrl: postgresAdminUrl })
    return { env: pooledEnv(pooler), stop: () => pooler.destroy() }
  },
  'pgbouncer+direct': async () => {
    const pooler = await startPgbouncer({ serverUrl: postgresAdminUrl })
    return { env: { ...pooledEnv(pooler), TEST_PGBOUNCER_DIRECT: '1' }, stop: () => pooler.destroy() }
  },
  'redis-cluster': async () => {
    const cluster = await startRedisCluster()
    return { env: { TEST_REDIS_CLUSTER_NODES: cluster.nodesSetting }, stop: () => cluster.stop() }
  },
  'redis-sentinel': async () => {
    const sentinel = await startRedisSentinel()
    return { env: { TEST_REDIS_SENTINELS: sentinel.sentinelsSetting, TEST_REDIS_SENTINEL_NAME: sentinel.name }, stop: () => sentinel.stop() }
  },
}

function parseArguments(argv) {
  const separator = argv.indexOf('--')
  const own = separator < 0 ? argv : argv.slice(0, separator)
  const reportIndex = own.indexOf('--report-dir')
  const only = own.indexOf('--only')
  return {
    reportDir: reportIndex < 0 ? undefined : own[reportIndex + 1],
    names: only < 0 ? Object.keys(topologies) : own[only + 1].split(','),
    vitestArgs: separator < 0 ? [] : argv.slice(separator + 1),
  }
}

function runVitest(args, env) {
  return new Promise((resolve) => {
    const child = spawn('npx', ['vitest', 'run', '--project', 'integration', '--project', 'e2e', ...topologySuites, ...args], { stdio: 'inherit', env: { ...process.env, ...env } })
    child.once('close', code => resolve(code ?? 1))
  })
}

const { reportDir, names, vitestArgs } = parseArguments(process.argv.slice(2))
if (reportDir) mkdirSync(reportDir, { recursive: true })
let failed = 0
for (const name of names) {
  if (!topologies[name]) throw new Error(`unknown topology ${name}: one of ${Object.keys(topologies).join(', ')}`)
  console.log(`\n=== suites on topology: ${name} ===`)
  const started = await topologies[name]()
  try {
    const report = reportDir ? ['--reporter=default', '--reporter=json', `--outputFile=${join(reportDir, `vitest-topology-${name}.json`)}`] : []
    const code = await runVitest([...report, ...vitestArgs], started.env)
    if (code !== 0) failed++
    console.log(`=== ${name}: ${code === 0 ? 'passed' : `failed (exit code ${code})`} ===`)
  }
  finally {
    await started.stop()
  }
}
process.exit(failed ? 1 : 0)
