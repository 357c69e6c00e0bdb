import { describeDatabaseError } from '@idempotent-checkout/db-kit'
import { escapeText } from '../observability/logger'

/**
 * How a job handler says what went wrong. Anything else thrown counts as retryable: an unknown
 * failure deserves another attempt, and max attempts bounds the cost.
 */

/**
 * Try again later with exponential backoff (or after `retryInMs`, a kind's own schedule); after max
 * attempts the job is dead-lettered.
 */
export class RetryableJobError extends Error {
  readonly errorClass = 'retryable'
  readonly retryInMs?: number
  constructor(message: string, options?: { cause?: unknown, retryInMs?: number }) {
    super(message, options)
    this.name = 'RetryableJobError'
    this.retryInMs = options?.retryInMs
  }
}

/** Retrying cannot help (invalid payload, a provider's definitive refusal): dead-letter at once. */
export class PermanentJobError extends Error {
  readonly errorClass = 'permanent'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'PermanentJobError'
  }
}

/**
 * Run again after `delayMs` without spending an attempt — a provider's 429 with Retry-After is not
 * the job's fault.
 */
export class SnoozeJob extends Error {
  readonly errorClass = 'snooze'
  constructor(readonly delayMs: number, reason = 'snoozed') {
    super(`${reason}; run again in ${delayMs} ms`)
    this.name = 'SnoozeJob'
  }
}

/** At commit, the claim's fence token was no longer current (rescued and claimed again): nothing was written. */
export class FencedOutError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'FencedOutError'
  }
}

/**
 * Why a running job's AbortSignal fired. fenced_out: a heartbeat found the claim superseded.
 * lock_lost: the resource lock expired or was taken. shutdown: the grace period ran out.
 */
export class JobInterrupted extends Error {
  constructor(readonly reason: 'fenced_out' | 'lock_lost' | 'shutdown') {
    super(`job interrupted: ${reason}`)
    this.name = 'JobInterrupted'
  }
}

export type JobErrorClass = 'retryable' | 'permanent'

export function classify(error: unknown): JobErrorClass {
  return error instanceof PermanentJobError ? 'permanent' : 'retryable'
}

/**
 * What jobs.last_error and the error history keep: a database failure by its SQLSTATE, never the
 * query's values. Escaped like any outside text (a provider's message may carry a NUL, which
 * Postgres refuses in text: the job's failure could not be recorded).
 */
export function describeError(error: unknown): string {
  return escapeText(describeDatabaseError(error) ?? (error instanceof Error ? `${error.name}: ${error.message}` : String(error)))
}
