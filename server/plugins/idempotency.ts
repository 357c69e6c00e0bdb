import { createReplayCache, type ReplayCache } from 'nuxt-idempotency/core'
import { type IdempotencyOutcomeReport, provideIdempotency } from 'nuxt-idempotency/server'
import type { Storage } from 'unstorage'
import { useConfig } from '../config'
import { databaseReady } from '../db'
import { useLocks } from '../locks'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { useRedis } from '../redis'

/**
 * The idempotency module runs on the app's own database, locks and Redis (`connect: false` in
 * nuxt.config.ts): one pool, the topologies and settings server/config knows. Its outcomes become
 * the app's metrics and warnings.
 */
export default defineNitroPlugin((nitroApp) => {
  // The configuration is read once the database is open: a bad one is the start-up plugin's to report.
  provideIdempotency(databaseReady().then((database) => {
    const config = useConfig()
    return {
      database,
      locks: useLocks(),
      replays: replayCache(),
      lockTtlMs: config.IDEMPOTENCY_LOCK_TTL_MS,
      leaseMs: config.IDEMPOTENCY_LEASE_MS,
      // The app closes its database and locks itself (server/plugins/startup.ts).
      close: async () => {},
    }
  }))
  nitroApp.hooks.hook('idempotency:outcome', countOutcome)
})

const REPLAY_MOUNT = 'idempotency-replays'

/** Finished responses: this instance's bytes-bounded tier, and Nitro storage on Redis when REDIS_URL is set. */
function replayCache(): ReplayCache {
  const config = useConfig()
  const redis = useRedis()
  let shared: Storage | undefined
  if (redis) {
    useStorage().mount(REPLAY_MOUNT, redis.storageDriver)
    shared = useStorage(REPLAY_MOUNT)
  }
  return createReplayCache({
    maxBytes: config.IDEMPOTENCY_REPLAY_CACHE_BYTES,
    shared: shared && { storage: shared, signingKey: config.REPLAY_CACHE_SECRET },
    onSharedError: () => metrics.replayCacheErrors.inc(),
    onRejected: reason => metrics.replayCacheRejected.inc({ reason }),
  })
}

const scopeKind = (scope: string | undefined) => scope?.split(':')[0] ?? 'unknown'

function countOutcome(report: IdempotencyOutcomeReport): void {
  const { route, outcome } = report
  if (outcome === 'signature_invalid') return
  metrics.idempotencyOutcomes.inc({ route, outcome })
  if (outcome === 'replay') metrics.replays.inc({ route })
  if (outcome === 'conflict') metrics.fingerprintConflicts.inc({ route })
  if (report.degraded) {
    metrics.idempotencyDegraded.inc({ route })
    log.warn('processing lock unavailable; the unique index decided', { requestId: report.event.context.requestId, idempotencyKey: report.key })
  }
  if (report.takeover) metrics.leaseTakeovers.inc({ scope: scopeKind(report.scope) })
  if (report.leaseLost) metrics.leaseLost.inc({ scope: scopeKind(report.scope) })
}
