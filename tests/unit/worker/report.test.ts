import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createReporter, outcome } from '../../../server/jobs/worker/report'
import { log } from '../../../server/observability/logger'
import { registry } from '../../../server/observability/metrics'
import { claimedJob, deferred, metricSample } from './fakes'

const STARTED = 1_000
/** 250.4 ms after STARTED: the line rounds, the histogram does not. */
const NOW = 1_250.4

const job = claimedJob({ id: 'job_7', kind: 'order.capture', attempt: 3, fence: 42, resourceId: 'order:o1', queueWaitMs: 15 })
const labels = { kind: 'order.capture', result: 'completed' }

beforeEach(() => {
  registry.resetMetrics()
  vi.spyOn(performance, 'now').mockReturnValue(NOW)
  vi.spyOn(log, 'info').mockImplementation(() => {})
  vi.spyOn(log, 'warn').mockImplementation(() => {})
})

afterEach(() => {
  vi.restoreAllMocks()
})

/** The line's fields for `job` from worker-1, after `extra`. */
const fields = (extra: Record<string, unknown>, transition: string, lockRelease?: string) => ({
  jobId: 'job_7',
  kind: 'order.capture',
  attempt: 3,
  fence: 42,
  worker: 'worker-1',
  resourceId: 'order:o1',
  queueWaitMs: 15,
  ...extra,
  lockRelease,
  transition,
  durationMs: 250,
})

describe('createReporter', () => {
  it('counts an attempt once, observes its duration once, and writes one info line with its fields', async () => {
    const extra = { lockKey: 'lock:order:o1', lockResult: 'acquired' }
    createReporter('worker-1').report(job, outcome('completed', extra), STARTED)
    expect(await metricSample('jobs_total', labels)).toBe(1)
    expect(await metricSample('job_processing_seconds', labels, 'job_processing_seconds_count')).toBe(1)
    expect(await metricSample('job_processing_seconds', labels, 'job_processing_seconds_sum')).toBeCloseTo(0.2504, 10)
    expect(vi.mocked(log.info).mock.calls).toStrictEqual([['job attempt finished', fields(extra, 'completed')]])
    expect(vi.mocked(log.warn)).not.toHaveBeenCalled()
  })

  it('writes a warn outcome\'s line at warn, its extra fields never overriding the transition or duration', () => {
    const extra = { errorClass: 'retryable', error: 'RetryableJobError: provider down', retryInMs: 2_000, transition: 'other', durationMs: 1 }
    createReporter('worker-1').report(job, outcome('retry', extra, 'warn'), STARTED)
    expect(vi.mocked(log.warn).mock.calls).toStrictEqual([['job attempt finished', fields(extra, 'retry')]])
    expect(vi.mocked(log.info)).not.toHaveBeenCalled()
  })

  it('holds the line for the lock release and writes it with the release\'s result; the metrics do not wait', async () => {
    const release = deferred<string>()
    const reporter = createReporter('worker-1')
    reporter.report(job, outcome('completed'), STARTED, release.promise)
    expect(await metricSample('jobs_total', labels)).toBe(1)
    expect(vi.mocked(log.info)).not.toHaveBeenCalled()
    // The duration is the attempt's, measured when reported, not when the lock came back.
    vi.mocked(performance.now).mockReturnValue(NOW + 5_000)
    release.resolve('expired')
    await reporter.settled(1_000)
    expect(vi.mocked(log.info).mock.calls).toStrictEqual([['job attempt finished', fields({}, 'completed', 'expired')]])
  })

  it('settled waits for the lines still held', async () => {
    const release = deferred<string>()
    const reporter = createReporter('worker-1')
    reporter.report(job, outcome('completed'), STARTED, release.promise)
    const settled = reporter.settled(60_000)
    expect(await Promise.race([settled.then(() => 'settled'), sleep(10, 'waiting')])).toBe('waiting')
    release.resolve('released')
    await settled
    expect(vi.mocked(log.info)).toHaveBeenCalledTimes(1)
  })

  it('settled gives up after its time on a line still held', async () => {
    const reporter = createReporter('worker-1')
    reporter.report(job, outcome('completed'), STARTED, new Promise<string>(() => {}))
    const settled = reporter.settled(30)
    expect(await Promise.race([settled.then(() => 'settled'), sleep(5, 'waiting')])).toBe('waiting')
    await settled
    expect(vi.mocked(log.info)).not.toHaveBeenCalled()
  })

  it('settled waits for other work handed over, too', async () => {
    const work = deferred<undefined>()
    const reporter = createReporter('worker-1')
    reporter.untilStopped(work.promise)
    const settled = reporter.settled(60_000)
    expect(await Promise.race([settled.then(() => 'settled'), sleep(10, 'waiting')])).toBe('waiting')
    work.resolve(undefined)
    await settled
  })

  it('an outcome is logged at info with no extra fields unless told', () => {
    expect(outcome('completed')).toStrictEqual({ transition: 'completed', extra: {}, level: 'info' })
  })
})
