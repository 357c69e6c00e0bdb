import { hostname } from 'node:os'
import type { AppConfig } from '../config'
import type { DatabaseHandle } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { createPaymentProvider } from '../payments'
import { createJobKinds } from './job-kinds'
import { createMailer } from '../mail/mailer'
import { createWorker, type Worker } from '../jobs/worker'

/** A worker configured from the environment: the same for the in-app worker and `npm run worker`. */
export function createConfiguredWorker(config: AppConfig, handle: DatabaseHandle, locks: Locks): Worker {
  return createWorker({
    db: handle.db,
    notifications: handle.notifications,
    locks,
    kinds: createJobKinds({
      payments: createPaymentProvider(config, handle.db),
      // mockpay off: no deliveries to send.
      ...(config.MOCKPAY_WEBHOOK_SECRET && { mockpay: { url: config.MOCKPAY_WEBHOOK_URL, secret: config.MOCKPAY_WEBHOOK_SECRET } }),
      webhookDelivery: {
        allowPrivate: config.WEBHOOK_ENDPOINTS_ALLOW_PRIVATE,
        retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE,
        disableAfterDays: config.WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS,
        timeoutMs: config.WEBHOOK_DELIVERY_TIMEOUT_MS,
      },
      mailer: createMailer(config),
    }),
    workerId: config.WORKER_ID ?? `${hostname()}:${process.pid}`,
    concurrency: config.WORKER_CONCURRENCY,
    prefetch: config.WORKER_PREFETCH,
    pollIntervalMs: config.JOB_POLL_INTERVAL_MS,
    claimCoalesceMs: config.JOB_CLAIM_COALESCE_MS,
    heartbeatTimeoutMs: config.JOB_HEARTBEAT_TIMEOUT_MS,
    lockTtlMs: config.JOB_LOCK_TTL_MS,
    lockBusyDelayMs: config.JOB_LOCK_BUSY_DELAY_MS,
    backoff: { baseMs: config.JOB_BACKOFF_BASE_MS, capMs: config.JOB_BACKOFF_CAP_MS },
    snooze: { max: config.JOB_MAX_SNOOZES, maxDelayMs: config.JOB_MAX_SNOOZE_MS },
    faultsEnabled: config.FAULTS_ENABLED,
  })
}
