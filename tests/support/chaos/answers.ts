/**
 * Every answer seen during the chaos run, with its time: what the load generator's clients got
 * (directly from an instance or through the balancer) and what the balancer relayed to the
 * workers' mockpay deliveries. A 502 the balancer made up is counted apart: it is not the app's.
 */

export type RequestKind
  = | 'order'
    | 'order read'
    | 'mockpay action'
    | 'mockpay intent read'
    | 'refund'
    | 'cancel'
    | 'webhook standard'
    | 'webhook stripe'
    | 'mockpay delivery (worker)'
    | 'inventory set'
    | 'inventory read'

export type Outcome = number | 'network error' | 'balancer 502'

export interface SeenAnswer {
  atMs: number
  kind: RequestKind
  /** direct: to an instance's own URL; balancer: through the test's balancer. */
  route: 'direct' | 'balancer'
  outcome: Outcome
  retryAfter: string | null
  /** From sending the request to the answer (or the failure); undefined when the balancer relayed it. */
  durationMs?: number
}

export class AnswerLog {
  readonly answers: SeenAnswer[] = []

  constructor(private readonly clock: () => number) {}

  record(kind: RequestKind, route: SeenAnswer['route'], outcome: Outcome, retryAfter: string | null = null, durationMs?: number): void {
    this.answers.push({ atMs: this.clock(), kind, route, outcome, retryAfter, ...(durationMs !== undefined && { durationMs }) })
  }

  /** Per request kind: how long the clients waited for an answer (p50, p95, max). */
  latencies(): Record<string, { requests: number, p50Ms: number, p95Ms: number, maxMs: number }> {
    const byKind = new Map<string, number[]>()
    for (const answer of this.answers) {
      if (answer.durationMs !== undefined) byKind.set(answer.kind, [...(byKind.get(answer.kind) ?? []), answer.durationMs])
    }
    return Object.fromEntries([...byKind].map(([kind, durations]) => {
      const sorted = durations.sort((a, b) => a - b)
      const at = (quantile: number) => sorted[Math.min(sorted.length - 1, Math.floor(quantile * sorted.length))]!
      return [kind, { requests: sorted.length, p50Ms: at(0.5), p95Ms: at(0.95), maxMs: sorted.at(-1)! }]
    }))
  }

  /** Answers that took longer than `thresholdMs`, with when they were sent: where the waiting happened. */
  slow(thresholdMs: number): Array<{ sentAt: string, kind: RequestKind, route: SeenAnswer['route'], outcome: Outcome, waitedMs: number }> {
    return this.answers
      .filter(answer => (answer.durationMs ?? 0) > thresholdMs)
      .map(answer => ({ sentAt: `+${((answer.atMs - answer.durationMs!) / 1000).toFixed(1)} s`, kind: answer.kind, route: answer.route, outcome: answer.outcome, waitedMs: answer.durationMs! }))
  }

  /** Rows: request kind; columns: status (or network error / balancer 502); cells: counts. */
  byKindAndOutcome(): Record<string, Record<string, number>> {
    const outcomes = [...new Set(this.answers.map(answer => String(answer.outcome)))].sort()
    const table: Record<string, Record<string, number>> = {}
    for (const answer of this.answers) {
      const row = (table[answer.kind] ??= Object.fromEntries(outcomes.map(outcome => [outcome, 0])))
      row[String(answer.outcome)]! += 1
    }
    return table
  }

  /** The app's own 5xx answers (the balancer's 502s are not among them). */
  appServerErrors(): SeenAnswer[] {
    return this.answers.filter(answer => typeof answer.outcome === 'number' && answer.outcome >= 500)
  }
}
