import { type BackoffPolicy, backoffMs } from '../backoff'
import { classify, describeError, FencedOutError, type JobErrorClass, type JobInterrupted, RetryableJobError, SnoozeJob } from '../errors'
import type { ClaimedJob } from '../store'

export interface RetryOptions {
  backoff: BackoffPolicy
  /** A job may snooze `max` times, each for at most `maxDelayMs`; the next snooze counts as a failed attempt. */
  snooze: { max: number, maxDelayMs: number }
}

/** What becomes of an attempt that did not complete; the executor writes it with the job store. */
export type RetryStep
  = | { step: 'fenced_out', error: string }
    | { step: 'released' }
    | { step: 'put_back_lock_lost' }
    | { step: 'snooze', delayMs: number, askedMs: number, reason: string }
    | { step: 'fail', errorClass: JobErrorClass, message: string, retryInMs: number, permanent: boolean }

/** Fenced out, released, put back, snoozed, retried or dead-lettered: decided from the attempt alone. */
export function nextStep(
  job: Pick<ClaimedJob, 'attempt' | 'snoozes'>,
  error: unknown,
  interruption: JobInterrupted['reason'] | undefined,
  options: RetryOptions,
  random: () => number = Math.random,
): RetryStep {
  // The fence's verdict comes first: whatever else happened, this claim is no longer ours.
  if (error instanceof FencedOutError || interruption === 'fenced_out') return { step: 'fenced_out', error: describeError(error) }
  // stop() already released the job.
  if (interruption === 'shutdown') return { step: 'released' }
  if (interruption === 'lock_lost') return { step: 'put_back_lock_lost' }
  if (error instanceof SnoozeJob) {
    if (job.snoozes < options.snooze.max) {
      return { step: 'snooze', delayMs: Math.min(error.delayMs, options.snooze.maxDelayMs), askedMs: error.delayMs, reason: error.message }
    }
    // Snoozed as often as allowed: from now on a snooze spends the attempt like any failure.
    error = new RetryableJobError(`snoozed ${job.snoozes} times (JOB_MAX_SNOOZES), now counted as a failed attempt: ${error.message}`)
  }
  const errorClass = classify(error)
  return { step: 'fail', errorClass, message: describeError(error), retryInMs: (error instanceof RetryableJobError ? error.retryInMs : undefined) ?? backoffMs(job.attempt, options.backoff, random), permanent: errorClass === 'permanent' }
}
