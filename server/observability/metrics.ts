/**
 * In-process counters in Prometheus' model (name, help, labels). Each instance keeps its own; a
 * scrape of every instance is summed by Prometheus.
 */

type Labels = Record<string, string>

const counters = new Map<string, { help: string, values: Map<string, number> }>()

function labelKey(labels: Labels): string {
  return Object.keys(labels).sort().map(k => `${k}="${String(labels[k]).replace(/["\\\n]/g, '_')}"`).join(',')
}

export function defineCounter(name: string, help: string) {
  const counter = counters.get(name) ?? { help, values: new Map<string, number>() }
  counters.set(name, counter)
  return {
    inc(labels: Labels = {}, by = 1) {
      const key = labelKey(labels)
      counter.values.set(key, (counter.values.get(key) ?? 0) + by)
    },
  }
}

export const metrics = {
  idempotencyOutcomes: defineCounter('idempotency_outcomes_total', 'Idempotent requests by outcome (miss, replay, conflict, in_progress, missing_key, invalid, error).'),
  leaseTakeovers: defineCounter('idempotency_lease_takeovers_total', 'Claims taken over after the previous owner\'s lease ran out or was released.'),
  leaseLost: defineCounter('idempotency_lease_lost_total', 'Owners that found their lease taken over at commit time and stored nothing.'),
  jobResults: defineCounter('jobs_total', 'Job attempts by kind and result (completed, retry, dead_letter, snoozed, lock_busy, fenced_out, released).'),
  jobErrors: defineCounter('job_errors_total', 'Failed job attempts by kind and error class (retryable, permanent).'),
  jobsRescued: defineCounter('jobs_rescued_total', 'Running jobs whose worker stopped heart-beating, put back or dead-lettered.'),
  jobsDeleted: defineCounter('jobs_deleted_total', 'Completed jobs deleted by retention.'),
  idempotencyRecordsDeleted: defineCounter('idempotency_records_deleted_total', 'Expired idempotency records deleted by retention.'),
  lockAcquires: defineCounter('lock_acquire_total', 'Resource lock attempts by result (acquired, busy, degraded: the lock backend was unreachable and the fence alone protected the work).'),
  locksLost: defineCounter('locks_lost_total', 'Resource locks found expired or taken while their job still ran.'),
  webhookResults: defineCounter('webhook_deliveries_total', 'Webhook deliveries by provider and result (accepted, duplicate, signature_invalid, payload_invalid, conflict, in_progress, error).'),
  uniqueViolations: defineCounter('unique_constraint_violations_total', 'Unique-constraint violations caught by the database fence, by constraint.'),
}
