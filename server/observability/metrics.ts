import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { log } from './logger'

/**
 * Prometheus metrics (prom-client), served by GET /api/metrics. Each process keeps its own; a
 * scrape of every instance is summed by Prometheus. Labels take bounded values only (outcomes,
 * route patterns, kinds, providers, results): never ids, keys or raw paths.
 */

export const registry = new Registry()
// Node process metrics: CPU, memory, heap, event loop lag, GC, handles.
collectDefaultMetrics({ register: registry })

type Labels<L extends string> = Partial<Record<L, string>>

/** Metrics never fail the work they count: a bad label is logged once per metric and dropped. */
const reported = new Set<string>()
function guard(name: string, record: () => void): void {
  try {
    record()
  }
  catch (error) {
    if (reported.has(name)) return
    reported.add(name)
    log.warn('metric not recorded', { metric: name, error })
  }
}

export function defineCounter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) {
  const counter = new Counter({ name, help, labelNames, registers: [registry] })
  return {
    inc(labels: Labels<L> = {}, by = 1) {
      guard(name, () => counter.inc(labels, by))
    },
  }
}

export function defineHistogram<L extends string = never>(name: string, help: string, labelNames: readonly L[], buckets: number[]) {
  const histogram = new Histogram({ name, help, labelNames, buckets, registers: [registry] })
  return {
    observe(labels: Labels<L>, seconds: number) {
      guard(name, () => histogram.observe(labels, seconds))
    },
  }
}

export function defineGauge<L extends string = never>(name: string, help: string, labelNames: readonly L[]) {
  const gauge = new Gauge({ name, help, labelNames, registers: [registry] })
  return {
    set(labels: Labels<L>, value: number) {
      guard(name, () => gauge.set(labels, value))
    },
  }
}

const SHORT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
const QUEUE_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 21600]

export const metrics = {
  // Idempotency layer (route: the operation's route, e.g. "POST /api/orders", "POST /api/webhooks/standard").
  idempotencyOutcomes: defineCounter('idempotency_outcomes_total', 'Idempotent requests by route and outcome (miss, replay, conflict, in_progress, missing_key, invalid, error).', ['route', 'outcome']),
  replays: defineCounter('idempotency_replays_total', 'Stored responses replayed, by route.', ['route']),
  fingerprintConflicts: defineCounter('idempotency_fingerprint_conflicts_total', 'Keys reused with a different request (422 idempotency-key-reused), by route.', ['route']),
  leaseTakeovers: defineCounter('idempotency_lease_takeovers_total', 'Claims taken over after the previous owner\'s lease ran out or was released.', ['scope']),
  idempotencyDegraded: defineCounter('idempotency_degraded_total', 'Idempotent requests decided by the unique index alone: the processing lock (Redis) did not answer, by route.', ['route']),
  replayCacheErrors: defineCounter('idempotency_replay_cache_errors_total', 'Reads or writes of the shared replay cache (Redis) that failed; the database answered instead.'),
  replayCacheRejected: defineCounter('idempotency_replay_cache_rejected_total', 'Entries of the shared replay cache (Redis) not believed: a signature not made with REPLAY_CACHE_SECRET, another request\'s entry, or past its record\'s expiry; the database answered instead.', ['reason']),
  leaseLost: defineCounter('idempotency_lease_lost_total', 'Owners that found their lease taken over at commit time and stored nothing.', ['scope']),

  // Worker.
  jobResults: defineCounter('jobs_total', 'Job attempts by kind and result (completed, retry, dead_letter, snoozed, lock_busy, lock_lost, fenced_out, released).', ['kind', 'result']),
  jobErrors: defineCounter('job_errors_total', 'Failed job attempts by kind and error class (retryable, permanent).', ['kind', 'error_class']),
  jobsDeadLettered: defineCounter('jobs_dead_lettered_total', 'Jobs moved to dead_letter (attempts exhausted, a permanent error, or rescued on their last attempt), by kind.', ['kind']),
  jobsDismissed: defineCounter('jobs_dismissed_total', 'Dead letters dismissed by an operator (they never run again), by kind.', ['kind']),
  jobsRescued: defineCounter('jobs_rescued_total', 'Running jobs whose worker stopped heart-beating, put back or dead-lettered.', ['kind', 'status']),
  jobsDeleted: defineCounter('jobs_deleted_total', 'Completed jobs deleted by retention.'),
  idempotencyRecordsDeleted: defineCounter('idempotency_records_deleted_total', 'Expired idempotency records deleted by retention.'),
  jobQueueWait: defineHistogram('job_queue_wait_seconds', 'Time from a job\'s run_at to its claim by a worker, by kind.', ['kind'], QUEUE_BUCKETS),
  jobProcessing: defineHistogram('job_processing_seconds', 'Duration of one job attempt from claim to its recorded outcome, by kind and result.', ['kind', 'result'], JOB_BUCKETS),

  // Resource locks.
  lockAcquires: defineCounter('lock_acquire_total', 'Resource lock attempts by result (acquired, busy, degraded: the lock backend was unreachable and the fence alone protected the work).', ['result']),
  lockWait: defineHistogram('lock_wait_seconds', 'Time spent acquiring a resource lock (one try, no queueing), by result.', ['result'], SHORT_BUCKETS),
  lockReleases: defineCounter('lock_release_total', 'Resource locks given back after a job attempt, by result (released; expired: it was no longer ours; error: the backend did not answer).', ['result']),
  locksLost: defineCounter('locks_lost_total', 'Resource locks found expired or taken while their job still ran.', ['kind']),

  // Webhooks and the database fence.
  paymentProviderCalls: defineHistogram('payment_provider_call_seconds', 'Calls to the payment provider by provider, operation (create, read, refund, cancel) and result (ok, unavailable: retried; refused: final; error).', ['provider', 'operation', 'result'], JOB_BUCKETS),
  paymentProviderFailing: defineGauge('payment_provider_failing', 'Whether the last call to the payment provider found it unavailable (1: down, retried; 0: it answered), by provider.', ['provider']),
  ledgerDiscrepanciesOpen: defineGauge('ledger_discrepancies_open', 'Open ledger discrepancies (an order\'s ledger and its provider\'s differ beyond what the ledger check heals), by kind; refreshed from the database by each ledger check run and resolution.', ['kind']),
  ledgerHeals: defineCounter('ledger_heals_total', 'Differences the ledger check healed, by provider and heal (record_provider_refund, fail_our_refund).', ['provider', 'heal']),
  paymentsReconciled: defineCounter('payments_reconciled_total', 'Payment states no webhook had reported, found at the provider and stored by reconciliation, by provider.', ['provider']),
  webhookResults: defineCounter('webhook_deliveries_total', 'Webhook deliveries by provider and result (accepted, duplicate, signature_invalid, payload_invalid, conflict, in_progress, error).', ['provider', 'result']),
  webhookEndpointAttempts: defineCounter('webhook_endpoint_attempts_total', 'Attempts to deliver an event to a shop\'s webhook endpoint, by result (delivered: 2xx; rejected: another status; gone: 410, the endpoint is disabled; timeout; address_refused: a private address without WEBHOOK_ENDPOINTS_ALLOW_PRIVATE; connection_error).', ['result']),
  uniqueViolations: defineCounter('unique_constraint_violations_total', 'Unique-constraint violations caught by the database fence, by constraint.', ['constraint']),

  // The request log (the evidence of every request).
  requestLogRowsDropped: defineCounter('request_log_rows_dropped_total', 'Request-log rows dropped unwritten: the queue held MAX_QUEUED_ROWS while the database could not take them (oldest first).'),
  requestLogRowsQuarantined: defineCounter('request_log_rows_quarantined_total', 'Request-log rows the database refused for their data (SQLSTATE class 22 or 23, or unencodable), logged at warn and not written, by reason (the SQLSTATE).', ['reason']),
  requestLogRowsDeleted: defineCounter('request_log_rows_deleted_total', 'Request-log rows older than REQUEST_LOG_RETENTION_DAYS deleted by retention.'),
  replayCountsForgotten: defineCounter('request_log_replays_forgotten_total', 'Minutes of replay counts an instance dropped unwritten to stay within its bound (a storm over more keys at once than it keeps).'),

  // HTTP (route: the matched route pattern, e.g. "/api/webhooks/:provider").
  httpDuration: defineHistogram('http_request_duration_seconds', 'API request duration from arrival to the response (or the client\'s disconnect, status 499), by method, route pattern and status.', ['method', 'route', 'status'], HTTP_BUCKETS),
}
