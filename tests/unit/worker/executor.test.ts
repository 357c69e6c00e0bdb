import { afterEach, describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import type { Database } from '@idempotent-checkout/db-kit'
import { JobInterrupted, PermanentJobError, RetryableJobError, SnoozeJob } from '../../../server/jobs/errors'
import { defineJobKind, type JobContext } from '../../../server/jobs/kind'
import type { JobStatus } from '../../../server/db/schema'
import type { JobEffect } from '../../../server/jobs/store'
import { execute, type Execution, type ExecutorOptions, interrupt } from '../../../server/jobs/worker/executor'
import type { PreparedJob } from '../../../server/jobs/worker/prepare'
import { setLogLevel } from '../../../server/observability/logger'
import { claimedJob } from './fakes'

// The executor logs nothing itself but a stall; LOG_LEVEL=info brings it back.
if (!process.env.LOG_LEVEL) setLogLevel('error')

const LOCK_BUSY_DELAY_MS = 50
const effect: JobEffect = { text: 'mail as (select 1 from done)', params: [] }

afterEach(() => {
  vi.restoreAllMocks()
})

/**
 * The executor over a fake store: every write recorded as `[method, job id, …arguments]`. The batch
 * completer answers `completes` (true: the fence held); store.fail answers `failStatus`.
 */
function executor(options: { completes?: boolean, failStatus?: JobStatus } = {}) {
  const writes: unknown[][] = []
  let committingCalls = 0
  const executorOptions: ExecutorOptions = {
    store: {
      complete: async (job) => {
        writes.push(['commit', job.id])
        return true
      },
      putBack: async (job, delayMs, putBackOptions) => {
        writes.push(['putBack', job.id, delayMs, ...(putBackOptions ? [putBackOptions] : [])])
        return true
      },
      fail: async (job, failure) => {
        writes.push(['fail', job.id, failure])
        return options.failStatus ?? 'failed'
      },
    },
    complete: async (job, given) => {
      writes.push(['complete', job.id, given])
      return options.completes ?? true
    },
    committing: () => { committingCalls++ },
    db: {} as Database,
    workerId: 'worker-1',
    lockBusyDelayMs: LOCK_BUSY_DELAY_MS,
    faultsEnabled: false,
    backoff: { baseMs: 1_000, capMs: 60_000 },
    snooze: { max: 3, maxDelayMs: 10_000 },
  }
  return { options: executorOptions, writes, committingCalls: () => committingCalls }
}

function execution(run: (context: JobContext) => Promise<void>, prepared: Partial<PreparedJob> = {}): Execution {
  const kind = defineJobKind({ kind: 'test.kind', payload: z.object({}), run: context => run(context) })
  return { prepared: { job: claimedJob({ fence: 7 }), kind, payload: {}, ...prepared }, controller: new AbortController(), paused: false, committing: false, done: Promise.resolve() }
}

describe('execute', () => {
  it('completes through the batch completer: completed, its slot handed on once', async () => {
    const { options, writes, committingCalls } = executor()
    const running = execution(context => context.complete(effect))
    expect(await execute(options, running)).toEqual({ transition: 'completed', extra: { lockKey: undefined, lockResult: undefined }, level: 'info' })
    expect(writes).toEqual([['complete', 'job_1', effect]])
    expect(running.committing).toBe(true)
    expect(committingCalls()).toBe(1)
  })

  it('completes a handler that did not, without an effect', async () => {
    const { options, writes } = executor()
    expect((await execute(options, execution(async () => {}))).transition).toBe('completed')
    expect(writes).toEqual([['complete', 'job_1', undefined]])
  })

  it('commits through store.complete without taking a batch slot', async () => {
    const { options, writes, committingCalls } = executor()
    expect((await execute(options, execution(context => context.commit(async () => {})))).transition).toBe('completed')
    expect(writes).toEqual([['commit', 'job_1']])
    expect(committingCalls()).toBe(0)
  })

  it('a completion whose fence is gone: fenced_out, and nothing else written', async () => {
    const { options, writes } = executor({ completes: false })
    expect(await execute(options, execution(context => context.complete(effect)))).toEqual({
      transition: 'fenced_out',
      extra: { lockKey: undefined, lockResult: undefined, error: 'FencedOutError: job job_1: fence 7 is no longer current; nothing written' },
      level: 'warn',
    })
    expect(writes).toEqual([['complete', 'job_1', effect]])
  })

  it('a busy lock: put back for the busy delay plus up to as much again, the handler not run', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.25)
    const { options, writes } = executor()
    const run = vi.fn(async () => {})
    expect(await execute(options, execution(run, { lockKey: 'lock:order:a', lockBusy: true }))).toEqual({
      transition: 'lock_busy', extra: { lockKey: 'lock:order:a', lockResult: 'busy' }, level: 'info',
    })
    expect(writes).toEqual([['putBack', 'job_1', 62.5]])
    expect(run).not.toHaveBeenCalled()
  })

  it('a permanent error: failed as permanent, dead-lettered', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5)
    const { options, writes } = executor({ failStatus: 'dead_letter' })
    const lock = { key: 'lock:order:a', token: 'token-1', holders: 1, lost: false }
    const outcome = await execute(options, execution(async () => { throw new PermanentJobError('refused') }, { lockKey: 'lock:order:a', lock }))
    expect(writes).toEqual([['fail', 'job_1', { errorClass: 'permanent', message: 'PermanentJobError: refused', retryInMs: 1_000, permanent: true }]])
    expect(outcome).toEqual({
      transition: 'dead_letter', extra: { lockKey: 'lock:order:a', lockResult: 'acquired', errorClass: 'permanent', error: 'PermanentJobError: refused' }, level: 'warn',
    })
  })

  it('a retryable error: failed, to be retried after the backoff', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5)
    const { options, writes } = executor()
    const running = execution(async () => { throw new RetryableJobError('provider down') }, { job: claimedJob({ attempt: 2 }) })
    expect((await execute(options, running)).extra).toEqual({ lockKey: undefined, lockResult: undefined, errorClass: 'retryable', error: 'RetryableJobError: provider down', retryInMs: 2_000 })
    expect(writes).toEqual([['fail', 'job_1', { errorClass: 'retryable', message: 'RetryableJobError: provider down', retryInMs: 2_000, permanent: false }]])
  })

  it('a snooze: put back as a snooze, its attempt kept', async () => {
    const { options, writes } = executor()
    const outcome = await execute(options, execution(async () => { throw new SnoozeJob(2_500, '429') }))
    expect(writes).toEqual([['putBack', 'job_1', 2_500, { clearFaults: false, snooze: true }]])
    expect(outcome).toEqual({ transition: 'snoozed', extra: { lockKey: undefined, lockResult: undefined, delayMs: 2_500, askedMs: 2_500, snoozes: 1, reason: '429; run again in 2500 ms' }, level: 'info' })
  })

  it('a lock lost mid-run: the handler aborted, the job put back for the busy delay', async () => {
    const { options, writes } = executor()
    const lock = { key: 'lock:order:a', token: 'token-1', holders: 1, lost: true }
    const running = execution(context => new Promise((_, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason))), { lockKey: 'lock:order:a', lock })
    const outcome = execute(options, running)
    interrupt(running, 'lock_lost')
    interrupt(running, 'shutdown')
    expect(await outcome).toEqual({ transition: 'lock_lost', extra: { lockKey: 'lock:order:a', lockResult: 'lost' }, level: 'warn' })
    expect(running.controller.signal.reason).toEqual(new JobInterrupted('lock_lost'))
    expect(writes).toEqual([['putBack', 'job_1', LOCK_BUSY_DELAY_MS]])
  })
})
