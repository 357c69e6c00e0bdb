import type { Server } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { ConfigError, useConfig } from '../config'
import { databaseReady, useDatabaseHandle } from '../db'
import { answerUnparseableRequests } from '../http/client-errors'
import { useAppMaintenance } from '../composition/app-maintenance'
import { createConfiguredWorker } from '../composition/worker'
import type { Worker } from '../jobs/worker'
import { closeLocks, useLocks } from '../locks'
import { type Scheduler, startScheduler } from '../maintenance/scheduler'
import { flushLog, log, setLogLevel } from '../observability/logger'
import { flushRequestLog, recordRequest } from '../observability/request-log'
import { closeRedis } from '../redis'

/** How long the request log waits for the handler of a request whose client disconnected. */
const ABANDONED_HANDLER_WAIT_MS = 60_000

/**
 * Start-up: validate the configuration, print generated dev secrets, migrate, start the
 * maintenance services' scheduler and the in-app worker (WORKER_ENABLED). Nitro does not await plugins, so requests wait on databaseReady() in the
 * request middleware; a failed start exits.
 */
export default defineNitroPlugin((nitroApp) => {
  let config
  try {
    config = useConfig()
  }
  catch (error) {
    console.error(error instanceof ConfigError ? error.message : error)
    process.exit(1)
  }
  setLogLevel(config.LOG_LEVEL)
  if (config.generatedSecrets.length) {
    const lines = config.generatedSecrets.map(name => `  ${name}=${config[name]}`)
    const kept = config.secretsFile ? `kept in ${config.secretsFile} across restarts; ` : ''
    console.log(`Generated development secrets (${kept}set them in the environment to choose your own):\n${lines.join('\n')}`)
  }
  for (const warning of config.warnings) log.warn(`${warning.setting} is on: unsafe in production`, { ...warning })

  // Connect the lock backend now, so the first request does not find it still connecting.
  const locks = useLocks()
  let worker: Worker | undefined
  let maintenance: Scheduler | undefined
  databaseReady().then(
    async (handle) => {
      // Behind a transaction pooler without a direct URL the workers poll: say so, with how often.
      log.info('database ready', { driver: handle.driver, poolMode: handle.poolMode, jobWakeUps: handle.notifications ? 'listen' : `poll every ${config.JOB_POLL_INTERVAL_MS} ms` })
      maintenance = startScheduler(useAppMaintenance())
      if (!config.WORKER_ENABLED) return
      worker = createConfiguredWorker(config, handle, locks)
      await worker.start()
    },
    (error) => {
      console.error('Start-up failed: could not open or migrate the database.', error)
      process.exit(1)
    },
  )

  nitroApp.hooks.hook('request', (event) => {
    // Nitro creates the HTTP server after its plugins, so the listener attaches on the first request
    // (in practice the load balancer's or orchestrator's readiness probe).
    answerUnparseableRequests((event.node.req.socket as { server?: Server }).server)
    // 'close' fires for every outcome — success, error, dropped connection — unlike afterResponse.
    if (event.path.startsWith('/api/') && event.path !== '/api/health') {
      let delivered = false
      const handled = new Promise<void>((resolve) => {
        event.context.markHandled = resolve
      })
      event.node.res.once('finish', () => { delivered = true })
      event.node.res.once('close', () => {
        const record = () => recordRequest(event, config.REQUEST_LOG_ENABLED ? databaseIfReady() : undefined, delivered)
        // A client that went away does not stop its handler: wait for the outcome (a commit, say),
        // which is what the evidence must show.
        if (delivered) record()
        else void Promise.race([handled, sleep(ABANDONED_HANDLER_WAIT_MS)]).then(record)
      })
    }
  })
  nitroApp.hooks.hook('beforeResponse', event => event.context.markHandled?.())
  nitroApp.hooks.hook('error', (_error, { event }) => event?.context.markHandled?.())

  nitroApp.hooks.hook('close', async () => {
    // SIGTERM: running jobs finish or are released before the connections they need are closed.
    await Promise.all([maintenance?.stop(), worker?.stop(config.JOB_SHUTDOWN_GRACE_MS)])
    await flushRequestLog()
    await closeLocks()
    closeRedis()
    await databaseReady().then(handle => handle.close(), () => {})
    // Last: the lines logged while shutting down are written before Nitro exits.
    flushLog()
  })
})

/** The database for the request log; a request answered before start-up finished has none. */
function databaseIfReady() {
  try {
    return useDatabaseHandle().db
  }
  catch {
    return undefined
  }
}
