/**
 * In-process Prometheus counters. Each instance exposes its own; Prometheus sums across instances.
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

export function renderPrometheus(): string {
  const lines: string[] = []
  for (const [name, { help, values }] of counters) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`)
    for (const [key, value] of values) lines.push(`${name}${key ? `{${key}}` : ''} ${value}`)
  }
  return `${lines.join('\n')}\n`
}

export const metrics = {
  idempotencyOutcomes: defineCounter('idempotency_outcomes_total', 'Idempotent requests by outcome (miss, replay, conflict, in_progress, missing_key, invalid, error).'),
  leaseTakeovers: defineCounter('idempotency_lease_takeovers_total', 'Claims taken over after the previous owner\'s lease ran out or was released.'),
  leaseLost: defineCounter('idempotency_lease_lost_total', 'Owners that found their lease taken over at commit time and stored nothing.'),
  uniqueViolations: defineCounter('unique_constraint_violations_total', 'Unique-constraint violations caught by the database fence, by constraint.'),
}
