import { setTimeout as sleep } from 'node:timers/promises'
import { log } from '../../observability/logger'
import { metrics } from '../../observability/metrics'
import type { ClaimedJob } from '../store'

/** How an attempt ended: its `jobs_total` result, what its log line adds, and the line's level. */
export interface Outcome {
  transition: string
  extra: Record<string, unknown>
  level: 'info' | 'warn'
}

export const outcome = (transition: string, extra: Record<string, unknown> = {}, level: Outcome['level'] = 'info'): Outcome => ({ transition, extra, level })

export function createReporter(workerId: string) {
  const pendingReports = new Set<Promise<void>>()

  /** Work that outlives its job's slot (a lock release, a report); stop() waits for it. */
  function untilStopped(work: Promise<void>): void {
    pendingReports.add(work)
    work.finally(() => pendingReports.delete(work))
  }

  /** One metric set and one log line per attempt; the line waits for the lock's release to carry it. */
  function report(job: ClaimedJob, result: Outcome, started: number, release?: Promise<string>): void {
    const seconds = (performance.now() - started) / 1000
    metrics.jobResults.inc({ kind: job.kind, result: result.transition })
    metrics.jobProcessing.observe({ kind: job.kind, result: result.transition }, seconds)
    const write = (lockRelease?: string) => log[result.level]('job attempt finished', {
      jobId: job.id,
      kind: job.kind,
      attempt: job.attempt,
      fence: job.fence,
      worker: workerId,
      resourceId: job.resourceId,
      queueWaitMs: job.queueWaitMs,
      ...result.extra,
      lockRelease,
      transition: result.transition,
      durationMs: Math.round(seconds * 1000),
    })
    if (!release) return write()
    untilStopped(release.then(write))
  }

  return {
    report,
    untilStopped,
    /** Waits for the reports still out, at most `ms`. */
    async settled(ms: number): Promise<void> {
      await Promise.race([Promise.allSettled([...pendingReports]), sleep(ms)])
    },
  }
}

export type Reporter = ReturnType<typeof createReporter>
