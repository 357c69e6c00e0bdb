import { z } from 'zod'
import { PermanentJobError, RetryableJobError, SnoozeJob } from './errors'
import type { ClaimedJob } from './store'

/**
 * Test-only job faults, stored on the job row and honoured only with FAULTS_ENABLED=true, so the
 * suites can crash, freeze and fail real jobs of real kinds in real worker processes.
 */
export const JobFaultsSchema = z.object({
  /** First attempt: freeze just before committing, heart-beat and lock renewal paused too (a GC pause, a partition). */
  stallMs: z.number().int().min(0).max(600_000).optional(),
  /** Attempts 1…n throw a retryable error. */
  failTimes: z.number().int().min(0).max(100).optional(),
  /** Every attempt throws a permanent error. */
  failPermanently: z.boolean().optional(),
  /** The first run snoozes this long (the fault is then consumed). */
  snoozeMs: z.number().int().min(0).max(600_000).optional(),
}).strict()

export type JobFaults = z.infer<typeof JobFaultsSchema>

export function readJobFaults(job: ClaimedJob, enabled: boolean): JobFaults {
  if (!enabled || !job.faults) return {}
  const parsed = JobFaultsSchema.safeParse(job.faults)
  return parsed.success ? parsed.data : {}
}

/** Throws the failure or snooze the faults script for this attempt, before the handler runs. */
export function injectJobFailure(job: ClaimedJob, faults: JobFaults): void {
  if (faults.snoozeMs !== undefined) throw new SnoozeJob(faults.snoozeMs, 'snooze fault injected')
  if (faults.failPermanently) throw new PermanentJobError('permanent failure injected')
  if (faults.failTimes !== undefined && job.attempt <= faults.failTimes) {
    throw new RetryableJobError(`failure injected (attempt ${job.attempt} of the first ${faults.failTimes})`)
  }
}
