import { ProviderUnavailable } from '../types'
import { RetryableJobError, SnoozeJob } from '../../jobs/errors'

/**
 * A provider that could not answer, as the job runner's retry: after its Retry-After without
 * spending an attempt, else with backoff. Anything else is thrown as it is.
 */
export function retryLater(error: unknown, provider: string): never {
  if (error instanceof ProviderUnavailable) {
    if (error.retryAfterMs !== undefined) throw new SnoozeJob(error.retryAfterMs, `${provider} asked to retry later`)
    throw new RetryableJobError(error.message, { cause: error })
  }
  throw error
}
