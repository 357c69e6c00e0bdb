/** How far a retry's wait may stray from the schedule, either way: endpoints that failed together are not retried together. */
export const RETRY_JITTER = 0.2

/**
 * The wait after failed attempt `attempt` (1 = the first): WEBHOOK_RETRY_SCHEDULE's entry for it,
 * ± RETRY_JITTER; undefined once the schedule is spent (the delivery gives up).
 */
export function retryDelayMs(scheduleMs: readonly number[], attempt: number, random: () => number = Math.random): number | undefined {
  const wait = scheduleMs[attempt - 1]
  if (wait === undefined) return undefined
  return Math.round(wait * (1 - RETRY_JITTER + 2 * RETRY_JITTER * random()))
}
