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
  uniqueViolations: defineCounter('unique_constraint_violations_total', 'Unique-constraint violations caught by the database fence, by constraint.'),
}
