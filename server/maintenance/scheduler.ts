import { setTimeout as sleep } from 'node:timers/promises'
import { log } from '../observability/logger'

/**
 * A maintenance service (docs/operations.md#maintenance): something every instance runs on an
 * interval, under its own task lock so that one instance does the work, and that an operator or a
 * test can run now.
 */
export interface MaintenanceService<Name extends string = string> {
  /** The name operators run it by (`POST /api/ops/tasks/{name}`). */
  name: Name
  /**
   * Runs start on the clock's multiples of this (as cron's do, so that every instance's runs meet
   * at one lock), plus `offsetMs`; absent: on demand only.
   */
  intervalMs?: number
  offsetMs?: number
  runOnce(): Promise<unknown>
}

export interface Scheduler {
  /** No run starts after this; runs under way get `graceMs` to end. */
  stop(graceMs?: number): Promise<void>
}

/** Milliseconds from `now` to the service's next start: the next multiple of its interval, plus its offset. */
export function untilNextRun(now: number, intervalMs: number, offsetMs = 0): number {
  const next = Math.floor((now - offsetMs) / intervalMs + 1) * intervalMs + offsetMs
  return next - now
}

/**
 * Runs each service every `intervalMs` of the clock. A service's runs never overlap (one that
 * outlasts its interval skips the starts it covers); a failed run is logged and the next one
 * retries. The one scheduler of the in-app worker and of `npm run worker`.
 */
export function startScheduler(services: MaintenanceService[]): Scheduler {
  let stopped = false
  const timers = new Map<string, NodeJS.Timeout>()
  const running = new Set<Promise<void>>()

  function schedule(service: MaintenanceService, intervalMs: number): void {
    if (stopped) return
    const timer = setTimeout(() => {
      const run = service.runOnce().then(
        () => {},
        error => log.warn('maintenance task failed; its next run retries', { task: service.name, error }),
      ).finally(() => {
        running.delete(run)
        schedule(service, intervalMs)
      })
      running.add(run)
    }, untilNextRun(Date.now(), intervalMs, service.offsetMs))
    // A pending run does not keep a process alive that is otherwise done.
    timer.unref()
    timers.set(service.name, timer)
  }

  for (const service of services) {
    if (service.intervalMs !== undefined) schedule(service, service.intervalMs)
  }

  return {
    async stop(graceMs = 2_000) {
      stopped = true
      for (const timer of timers.values()) clearTimeout(timer)
      await Promise.race([Promise.allSettled([...running]), sleep(graceMs)])
    },
  }
}
