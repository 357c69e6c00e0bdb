/**
 * `npm run worker`: the job runner as its own process, for deployments that scale workers apart
 * from the API (set WORKER_ENABLED=false on the app instances then, or keep both). Same
 * configuration as the server; needs DATABASE_URL (an embedded PGlite belongs to the app process).
 * Runs job rescue and retention on the app's scheduler, each under its lock
 * (docs/operations.md#maintenance).
 */
import { storeMaintenance } from '../server/composition/maintenance'
import { createConfiguredWorker } from '../server/composition/worker'
import { ConfigError, initConfig } from '../server/config'
import { openAppDatabase } from '../server/db'
import { closeLocks, useLocks } from '../server/locks'
import { startScheduler } from '../server/maintenance/scheduler'
import { setLogLevel } from '../server/observability/logger'
import { closeRedis } from '../server/redis'

let config
try {
  config = initConfig({ secretsOptional: true })
}
catch (error) {
  console.error(error instanceof ConfigError ? error.message : error)
  process.exit(1)
}
setLogLevel(config.LOG_LEVEL)
if (!config.DATABASE_URL) {
  console.error('The standalone worker needs DATABASE_URL: the embedded database belongs to the app process, whose in-app worker runs the jobs.')
  process.exit(1)
}

const handle = await openAppDatabase(config)
  .catch((error) => {
    console.error('Start-up failed: could not open or migrate the database.', error)
    process.exit(1)
  })
const locks = useLocks()
const worker = createConfiguredWorker(config, handle, locks)
await worker.start()
const maintenance = startScheduler(storeMaintenance(config, async () => ({ handle, locks })))

let stopping = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, async () => {
    if (stopping) return
    stopping = true
    await Promise.all([maintenance.stop(), worker.stop(config.JOB_SHUTDOWN_GRACE_MS)])
    await closeLocks()
    closeRedis()
    await handle.close()
    process.exit(0)
  })
}
