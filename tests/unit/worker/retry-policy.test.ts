import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { FencedOutError, type JobInterrupted, PermanentJobError, RetryableJobError, SnoozeJob } from '../../../server/jobs/errors'
import { nextStep, type RetryOptions, type RetryStep } from '../../../server/jobs/worker/retry-policy'

const options: RetryOptions = { backoff: { baseMs: 1_000, capMs: 60_000 }, snooze: { max: 3, maxDelayMs: 10_000 } }
/** random() = 0.5 puts the backoff's jitter at exactly zero. */
const noJitter = () => 0.5

type Reason = JobInterrupted['reason'] | undefined

describe('nextStep', () => {
  const cases: Array<[string, { attempt: number, snoozes: number }, unknown, Reason, RetryStep]> = [
    ['a lost fence, however the handler failed', { attempt: 2, snoozes: 0 }, new FencedOutError('job j: fence 7 is no longer current; nothing written'), undefined,
      { step: 'fenced_out', error: 'FencedOutError: job j: fence 7 is no longer current; nothing written' }],
    ['a heartbeat that found the claim superseded wins over a snooze', { attempt: 1, snoozes: 0 }, new SnoozeJob(500), 'fenced_out',
      { step: 'fenced_out', error: 'SnoozeJob: snoozed; run again in 500 ms' }],
    ['shutdown', { attempt: 1, snoozes: 0 }, new RetryableJobError('aborted'), 'shutdown', { step: 'released' }],
    ['a lost lock', { attempt: 4, snoozes: 2 }, new PermanentJobError('aborted'), 'lock_lost', { step: 'put_back_lock_lost' }],
    ['a snooze under the max, for what it asked', { attempt: 1, snoozes: 2 }, new SnoozeJob(2_500, '429'), undefined,
      { step: 'snooze', delayMs: 2_500, askedMs: 2_500, reason: '429; run again in 2500 ms' }],
    ['a snooze asking more than maxDelayMs, for maxDelayMs', { attempt: 1, snoozes: 0 }, new SnoozeJob(2 ** 40), undefined,
      { step: 'snooze', delayMs: 10_000, askedMs: 2 ** 40, reason: `snoozed; run again in ${2 ** 40} ms` }],
    ['a snooze past the max, as a failed attempt', { attempt: 2, snoozes: 3 }, new SnoozeJob(2_500, '429'), undefined,
      { step: 'fail', errorClass: 'retryable', message: 'RetryableJobError: snoozed 3 times (JOB_MAX_SNOOZES), now counted as a failed attempt: 429; run again in 2500 ms', retryInMs: 2_000, permanent: false }],
    ['a retryable error, backed off by its attempt', { attempt: 3, snoozes: 0 }, new RetryableJobError('provider down'), undefined,
      { step: 'fail', errorClass: 'retryable', message: 'RetryableJobError: provider down', retryInMs: 4_000, permanent: false }],
    ['anything else thrown, as retryable', { attempt: 1, snoozes: 0 }, 'a string', undefined,
      { step: 'fail', errorClass: 'retryable', message: 'a string', retryInMs: 1_000, permanent: false }],
    ['a permanent error', { attempt: 1, snoozes: 0 }, new PermanentJobError('invalid payload'), undefined,
      { step: 'fail', errorClass: 'permanent', message: 'PermanentJobError: invalid payload', retryInMs: 1_000, permanent: true }],
  ]

  it.each(cases)('%s', (_name, job, error, interruption, expected) => {
    expect(nextStep(job, error, interruption, options, noJitter)).toEqual(expected)
  })

  const errors = fc.oneof(
    fc.string().map(message => new RetryableJobError(message)),
    fc.string().map(message => new PermanentJobError(message)),
    fc.integer({ min: 0, max: 2 ** 40 }).map(delayMs => new SnoozeJob(delayMs)),
    fc.string().map(message => new FencedOutError(message)),
    fc.string(),
  )
  const reasons = fc.constantFrom<Reason>(undefined, 'fenced_out', 'shutdown', 'lock_lost')
  const jobs = fc.record({ attempt: fc.integer({ min: 1, max: 40 }), snoozes: fc.integer({ min: 0, max: 10 }) })
  const randoms = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })

  it('a lost fence always wins; a snooze under the max never spends the attempt; a retry waits within the backoff bounds', () => {
    fc.assert(fc.property(jobs, errors, reasons, randoms, (job, error, interruption, random) => {
      const next = nextStep(job, error, interruption, options, () => random)
      if (error instanceof FencedOutError || interruption === 'fenced_out') {
        expect(next.step).toBe('fenced_out')
        return
      }
      if (interruption) {
        expect(next).toEqual({ step: interruption === 'shutdown' ? 'released' : 'put_back_lock_lost' })
        return
      }
      if (error instanceof SnoozeJob && job.snoozes < options.snooze.max) {
        expect(next).toMatchObject({ step: 'snooze', delayMs: Math.min(error.delayMs, options.snooze.maxDelayMs), askedMs: error.delayMs })
        return
      }
      expect(next.step).toBe('fail')
      if (next.step !== 'fail') return
      expect(next.permanent).toBe(error instanceof PermanentJobError)
      expect(next.errorClass).toBe(error instanceof PermanentJobError ? 'permanent' : 'retryable')
      const exponential = Math.min(options.backoff.capMs, options.backoff.baseMs * 2 ** (job.attempt - 1))
      expect(next.retryInMs).toBeGreaterThanOrEqual(Math.round(0.8 * exponential))
      expect(next.retryInMs).toBeLessThanOrEqual(Math.round(1.2 * exponential))
    }))
  })
})
