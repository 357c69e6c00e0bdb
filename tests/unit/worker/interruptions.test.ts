import { setTimeout as sleep } from 'node:timers/promises'
import { beforeEach, describe, expect, it } from 'vitest'
import { JobInterrupted } from '../../../server/jobs/errors'
import type { ClaimedJob } from '../../../server/jobs/store'
import type { Execution } from '../../../server/jobs/worker/executor'
import { createInterruptions } from '../../../server/jobs/worker/interruptions'
import type { PreparedJob } from '../../../server/jobs/worker/prepare'
import { outcome } from '../../../server/jobs/worker/report'
import type { HeldLock } from '../../../server/jobs/worker/resource-locks'
import { registry } from '../../../server/observability/metrics'
import { deferred, metricSample, preparedJob, recordingReporter, runningJob } from './fakes'

const LOCK_BUSY_DELAY_MS = 50

beforeEach(() => {
  registry.resetMetrics()
})

/**
 * Interruptions over a fake store whose put-backs succeed at once. Put-backs, lock drops and
 * interrupts are recorded in `events`, in the order they happen; dropLock answers `release`.
 */
function interruptionsOver(buffer: PreparedJob[], active: Map<string, Execution>, release?: Promise<string>) {
  const events: string[] = []
  for (const execution of active.values()) {
    execution.controller.signal.addEventListener('abort', () => events.push(`interrupt ${execution.prepared.job.id}`))
  }
  const { reporter, reports } = recordingReporter()
  const interruptions = createInterruptions({
    store: {
      putBack: (job: ClaimedJob, delayMs: number) => {
        events.push(`putBack ${job.id} ${delayMs}`)
        return Promise.resolve(true)
      },
    },
    buffer,
    active,
    reporter,
    dropLock: (entry) => {
      events.push(`drop ${entry.job.id}`)
      return release
    },
    lockBusyDelayMs: LOCK_BUSY_DELAY_MS,
  })
  return { interruptions, events, reports, settled: reporter.settled }
}

const activeOf = (executions: Execution[]) => new Map(executions.map(execution => [execution.prepared.job.id, execution]))

/**
 * A job running in `active` until the test finishes it (`finish`) or, with `untilInterrupted`, until
 * it is interrupted; it leaves `active` then, as the dispatcher takes it out.
 */
function runningIn(active: Map<string, Execution>, id: string, { untilInterrupted = false } = {}) {
  const finished = deferred<undefined>()
  const execution = runningJob(preparedJob(id), finished.promise.then(() => { active.delete(id) }))
  if (untilInterrupted) execution.controller.signal.addEventListener('abort', () => finished.resolve(undefined))
  active.set(id, execution)
  return { execution, finish: () => finished.resolve(undefined) }
}

const ids = (entries: PreparedJob[]) => entries.map(entry => entry.job.id)
const reported = (reports: ReturnType<typeof recordingReporter>['reports']) => reports.map(({ jobId, result }) => [jobId, result])

describe('createInterruptions', () => {
  it('dropBuffered takes the entry out of the buffer at once and reports it once, after its put-back', async () => {
    const putBack = deferred<boolean>()
    const release = Promise.resolve('released')
    const buffer = [preparedJob('job_1'), preparedJob('job_2')]
    const { interruptions, events, reports, settled } = interruptionsOver(buffer, new Map(), release)
    const result = outcome('fenced_out', { error: 'claim superseded while buffered' }, 'warn')
    interruptions.dropBuffered(buffer[0]!, result, putBack.promise)
    expect(ids(buffer)).toEqual(['job_2'])
    await new Promise(resolve => setImmediate(resolve))
    expect(reports).toEqual([])
    expect(events).toEqual([])
    putBack.resolve(true)
    await settled(0)
    expect(reports).toHaveLength(1)
    expect(reports[0]!.jobId).toBe('job_1')
    expect(reports[0]!.result).toBe(result)
    expect(reports[0]!.release).toBe(release)
    expect(events).toEqual(['drop job_1'])
  })

  it('dropBuffered reports the entry once even when its put-back fails', async () => {
    const buffer = [preparedJob('job_1')]
    const { interruptions, reports, settled } = interruptionsOver(buffer, new Map())
    interruptions.dropBuffered(buffer[0]!, outcome('released', { reason: 'shutdown' }), Promise.reject(new Error('database down')))
    await settled(0)
    expect(reported(reports)).toEqual([['job_1', outcome('released', { reason: 'shutdown' })]])
    expect(buffer).toEqual([])
  })

  it('lockLost interrupts the running jobs holding the lock and puts its buffered jobs back after the busy delay', async () => {
    const held: HeldLock = { key: 'lock:order:a', token: 'token-a', holders: 3, lost: true }
    const other: HeldLock = { key: 'lock:order:b', token: 'token-b', holders: 2, lost: false }
    const running = [runningJob(preparedJob('job_r1', { lock: held })), runningJob(preparedJob('job_r2', { lock: other })), runningJob(preparedJob('job_r3'))]
    const buffer = [preparedJob('job_b1', { lock: held }), preparedJob('job_b2', { lock: other }), preparedJob('job_b3', { lock: held })]
    const { interruptions, events, reports, settled } = interruptionsOver(buffer, activeOf(running))
    interruptions.lockLost(held)
    expect(running.map(execution => execution.controller.signal.aborted)).toEqual([true, false, false])
    expect(running[0]!.controller.signal.reason).toEqual(new JobInterrupted('lock_lost'))
    expect(running[0]!.controller.signal.reason).toBeInstanceOf(JobInterrupted)
    expect(ids(buffer)).toEqual(['job_b2'])
    await settled(0)
    expect(events).toEqual(['interrupt job_r1', `putBack job_b1 ${LOCK_BUSY_DELAY_MS}`, `putBack job_b3 ${LOCK_BUSY_DELAY_MS}`, 'drop job_b1', 'drop job_b3'])
    const lost = outcome('lock_lost', { lockKey: 'lock:order:a', lockResult: 'lost' }, 'warn')
    expect(reported(reports)).toEqual([['job_b1', lost], ['job_b3', lost]])
    expect(await metricSample('locks_lost_total', { kind: 'test.kind' })).toBe(3)
  })

  it('releaseAll puts buffered jobs back at once, waits out the grace for running ones, then interrupts and puts back the rest', async () => {
    const active = new Map<string, Execution>()
    const finishing = runningIn(active, 'job_r1')
    const stuck = runningIn(active, 'job_r2', { untilInterrupted: true })
    const buffer = [preparedJob('job_b1'), preparedJob('job_b2')]
    const { interruptions, events, reports, settled } = interruptionsOver(buffer, active)
    const releasing = interruptions.releaseAll(50)
    expect(buffer).toEqual([])
    expect(events).toEqual(['putBack job_b1 0', 'putBack job_b2 0'])
    await sleep(5)
    finishing.finish()
    expect(await releasing).toBe(3)
    await settled(0)
    expect(finishing.execution.controller.signal.aborted).toBe(false)
    expect(stuck.execution.controller.signal.reason).toEqual(new JobInterrupted('shutdown'))
    // The buffered jobs are reported as soon as their put-backs settle; the stuck one is interrupted and put back only after the grace.
    expect(events).toEqual(['putBack job_b1 0', 'putBack job_b2 0', 'drop job_b1', 'drop job_b2', 'interrupt job_r2', 'putBack job_r2 0'])
    const released = outcome('released', { reason: 'shutdown' })
    expect(reported(reports)).toEqual([['job_b1', released], ['job_b2', released]])
    expect(active.size).toBe(0)
  })

  it('releaseAll waits no longer than its running jobs take', async () => {
    const active = new Map<string, Execution>()
    const finishing = runningIn(active, 'job_r1')
    const { interruptions, events } = interruptionsOver([], active)
    const releasing = interruptions.releaseAll(60_000)
    await new Promise(resolve => setImmediate(resolve))
    finishing.finish()
    expect(await releasing).toBe(0)
    expect(finishing.execution.controller.signal.aborted).toBe(false)
    expect(events).toEqual([])
  })
})
