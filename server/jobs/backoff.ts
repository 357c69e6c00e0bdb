export interface BackoffPolicy {
  baseMs: number
  capMs: number
}

/** ± this share of the delay, so retries of jobs that failed together spread out. */
export const BACKOFF_JITTER = 0.2

/**
 * The wait before the retry that follows failed attempt `attempt` (1-based):
 * min(cap, base × 2^(attempt-1)), then ±20 % jitter.
 */
export function backoffMs(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const exponential = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempt - 1))
  const jitter = (random() * 2 - 1) * BACKOFF_JITTER
  return Math.max(0, Math.round(exponential * (1 + jitter)))
}
