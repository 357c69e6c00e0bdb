import type { DatabaseHandle } from '@idempotent-checkout/db-kit'
import type { Locks, IdempotencyDeps } from 'nuxt-idempotency/core'
import type { AppConfig } from '../config'
import { rescueStaleJobs } from '../jobs/rescue'
import { deleteCompletedJobs } from '../jobs/retention'
import { runLedgerCheck } from '../ledger/check'
import { expireUnpaidOrders } from '../orders/cancel'
import { useLedgerReader } from '../ledger/providers'
import { deleteExpiredIdempotencyRecords } from '../maintenance/records-retention'
import { deleteOldRequestLogRows } from '../maintenance/request-log-retention'
import type { MaintenanceService } from '../maintenance/scheduler'
import type { TaskName } from '../ops/schemas'
import { usePaymentProvider } from '../payments'
import { reconcilePayments } from '../webhooks/reconcile'

/**
 * Every maintenance service and its interval, in one place (docs/operations.md#maintenance). The
 * app runs them all; `npm run worker` runs those of the jobs and the stores, which need no provider.
 */

/**
 * Each table's retention runs once a minute, the three 20 s apart, each for at most 18 s: one
 * paced delete at a time, so retention's share of the database stays RETENTION_PACE.dutyCycle, and
 * each table gets 18 s of it a minute whatever the others' backlogs (docs/operations.md#retention).
 */
const RETENTION_INTERVAL_MS = 60_000
const RETENTION_STAGGER_MS = 20_000
const RETENTION_PACE_PER_TABLE = { budgetMs: 18_000 }
const RECONCILE_INTERVAL_MS = 60_000
/** Unpaid orders expire within this of their TTL; each run cancels at most EXPIRE_BATCH, the next the rest. */
const EXPIRE_INTERVAL_MS = 30_000
const EXPIRE_BATCH = 500
/** Each run compares at most LEDGER_CHECK_BATCH orders with the provider; off reconciliation's second. */
const LEDGER_CHECK_INTERVAL_MS = 5 * 60_000
const LEDGER_CHECK_OFFSET_MS = 30_000

type Service = MaintenanceService<TaskName>
type Opened = () => Promise<{ handle: DatabaseHandle, locks: Locks }>

/** Rescue, retention and the expiry of unpaid orders: what any process with the database and the locks runs. */
export function storeMaintenance(config: AppConfig, open: Opened): Service[] {
  const withStores = <T>(run: (handle: DatabaseHandle, locks: Locks) => Promise<T>) => async () => {
    const { handle, locks } = await open()
    return run(handle, locks)
  }
  return [
    { name: 'jobs:rescue', intervalMs: config.JOB_MAINTENANCE_INTERVAL_MS, runOnce: withStores(({ db }, locks) => rescueStaleJobs(db, locks, config.JOB_HEARTBEAT_TIMEOUT_MS)) },
    {
      name: 'orders:expire',
      intervalMs: EXPIRE_INTERVAL_MS,
      runOnce: withStores(({ db }, locks) => expireUnpaidOrders(db, locks, { ttlSeconds: config.ORDER_PAYMENT_TTL_SECONDS, limit: EXPIRE_BATCH })),
    },
    {
      name: 'retention:records',
      intervalMs: RETENTION_INTERVAL_MS,
      runOnce: withStores(({ db }, locks) => deleteExpiredIdempotencyRecords(db, locks, RETENTION_PACE_PER_TABLE)),
    },
    {
      name: 'retention:jobs',
      intervalMs: RETENTION_INTERVAL_MS,
      offsetMs: RETENTION_STAGGER_MS,
      runOnce: withStores(({ db }, locks) => deleteCompletedJobs(db, locks, config.JOB_RETENTION_DAYS, RETENTION_PACE_PER_TABLE)),
    },
    {
      name: 'retention:request-log',
      intervalMs: RETENTION_INTERVAL_MS,
      offsetMs: 2 * RETENTION_STAGGER_MS,
      runOnce: withStores(({ db }, locks) => deleteOldRequestLogRows(db, locks, config.REQUEST_LOG_RETENTION_DAYS, RETENTION_PACE_PER_TABLE)),
    },
  ]
}

/** The app's services: rescue, retention, reconciliation and the ledger check. */
export function appMaintenance(config: AppConfig, open: Opened, idempotency: () => Promise<IdempotencyDeps>): Service[] {
  const stores = storeMaintenance(config, open)
  return [
    ...stores,
    // On demand only: the three retention services one after the other, as one task.
    { name: 'retention:cleanup', runOnce: () => runInTurn(stores.filter(service => service.name.startsWith('retention:'))) },
    {
      name: 'payments:reconcile',
      intervalMs: RECONCILE_INTERVAL_MS,
      runOnce: async () => reconcilePayments({
        handle: (await open()).handle,
        provider: usePaymentProvider(),
        idempotency: await idempotency(),
        afterSeconds: config.PAYMENT_RECONCILE_AFTER_SECONDS,
        ttlSeconds: config.WEBHOOK_IDEMPOTENCY_TTL_SECONDS,
      }),
    },
    {
      name: 'payments:ledger-check',
      intervalMs: LEDGER_CHECK_INTERVAL_MS,
      offsetMs: LEDGER_CHECK_OFFSET_MS,
      runOnce: async () => runLedgerCheck({
        ...await open(),
        reader: useLedgerReader(),
        days: config.LEDGER_CHECK_DAYS,
        settleSeconds: config.LEDGER_CHECK_SETTLE_SECONDS,
      }),
    },
  ]
}

/** Each service's result by its name. */
async function runInTurn(services: Service[]): Promise<Record<string, unknown>> {
  const results: Record<string, unknown> = {}
  for (const service of services) results[service.name] = await service.runOnce()
  return results
}
