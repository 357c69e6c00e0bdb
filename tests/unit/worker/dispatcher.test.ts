import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createDispatcher } from '../../../server/jobs/worker/dispatcher'
import type { Execution } from '../../../server/jobs/worker/executor'
import type { PreparedJob } from '../../../server/jobs/worker/prepare'
import { outcome, type Outcome } from '../../../server/jobs/worker/report'
import { log } from '../../../server/observability/logger'
import { type Deferred, deferred, preparedJob } from './fakes'

const STARTED_AT = 1_000

beforeEach(() => {
  vi.spyOn(performance, 'now').mockReturnValue(STARTED_AT)
})

afterEach(() => {
  vi.restoreAllMocks()
})

/**
 * A dispatcher over `buffer` whose executions run until the test finishes them (`finish`). Starts,
 * lock drops and finished calls are recorded in `events`, in the order they happen; dropLock answers
 * `releases[id]`.
 */
function dispatcherOver(buffer: PreparedJob[], concurrency: number, releases: Record<string, Promise<string>> = {}) {
  const events: string[] = []
  const runs = new Map<string, { execution: Execution, result: Deferred<Outcome> }>()
  const finished: Array<[PreparedJob, Outcome | undefined, number, Promise<string> | undefined]> = []
  let stopping = false
  const dispatcher = createDispatcher({
    concurrency,
    buffer,
    stopping: () => stopping,
    execute: (execution) => {
      events.push(`start ${execution.prepared.job.id}`)
      const result = deferred<Outcome>()
      runs.set(execution.prepared.job.id, { execution, result })
      return result.promise
    },
    dropLock: (prepared) => {
      events.push(`drop ${prepared.job.id}`)
      return releases[prepared.job.id]
    },
    finished: (...call) => {
      events.push(`finished ${call[0].job.id}`)
      finished.push(call)
    },
  })
  const run = (id: string) => runs.get(id)!
  /** Ends the job's execution with `result` (rejects with it when it is an Error) and waits for the dispatcher to see it. */
  const finish = async (id: string, result: Outcome | Error = outcome('completed')) => {
    if (result instanceof Error) run(id).result.reject(result)
    else run(id).result.resolve(result)
    await run(id).execution.done
  }
  return { dispatcher, events, finished, run, finish, stop: () => { stopping = true } }
}

const ids = (entries: PreparedJob[]) => entries.map(entry => entry.job.id)

describe('createDispatcher', () => {
  it('starts buffered jobs in claim order while slots are free, the rest staying buffered', () => {
    const buffer = [preparedJob('job_1'), preparedJob('job_2'), preparedJob('job_3')]
    const { dispatcher, events } = dispatcherOver(buffer, 2)
    dispatcher.dispatch()
    dispatcher.dispatch()
    expect(events).toEqual(['start job_1', 'start job_2'])
    expect(ids(buffer)).toEqual(['job_3'])
    expect([...dispatcher.active.keys()]).toEqual(['job_1', 'job_2'])
    expect([dispatcher.inUse, dispatcher.committing]).toEqual([2, 0])
  })

  it('refills a finished job\'s slot after dropping its lock, then reports it once with its result and lock release', async () => {
    const release = Promise.resolve('released')
    const buffer = [preparedJob('job_1', { lockKey: 'lock:order:a' }), preparedJob('job_2'), preparedJob('job_3')]
    const [first] = buffer
    const { dispatcher, events, finished, finish } = dispatcherOver(buffer, 2, { job_1: release })
    dispatcher.dispatch()
    const result = outcome('retry', { retryInMs: 1_000 }, 'warn')
    await finish('job_1', result)
    expect(events).toEqual(['start job_1', 'start job_2', 'drop job_1', 'start job_3', 'finished job_1'])
    expect(finished).toHaveLength(1)
    expect(finished[0]![0]).toBe(first)
    expect(finished[0]![1]).toBe(result)
    expect(finished[0]![2]).toBe(STARTED_AT)
    expect(finished[0]![3]).toBe(release)
    expect([...dispatcher.active.keys()]).toEqual(['job_2', 'job_3'])
    expect(buffer).toEqual([])
  })

  it('never runs two jobs of one lock key at once: the second waits in the buffer until the first finishes', async () => {
    const buffer = [
      preparedJob('job_a1', { lockKey: 'lock:order:a' }),
      preparedJob('job_a2', { lockKey: 'lock:order:a' }),
      preparedJob('job_b1', { lockKey: 'lock:order:b' }),
      preparedJob('job_n1'),
    ]
    const { dispatcher, events, finish } = dispatcherOver(buffer, 4)
    dispatcher.dispatch()
    expect(events).toEqual(['start job_a1', 'start job_b1', 'start job_n1'])
    expect(ids(buffer)).toEqual(['job_a2'])
    expect(dispatcher.inUse).toBe(3)
    await finish('job_b1')
    expect(ids(buffer)).toEqual(['job_a2'])
    await finish('job_a1')
    expect(events.slice(3)).toEqual(['drop job_b1', 'finished job_b1', 'drop job_a1', 'start job_a2', 'finished job_a1'])
    expect(buffer).toEqual([])
  })

  it('gives the slot of a committing job to the next one, and counts it back once that job finishes', async () => {
    const buffer = [preparedJob('job_1'), preparedJob('job_2'), preparedJob('job_3')]
    const { dispatcher, events, run, finish } = dispatcherOver(buffer, 1)
    dispatcher.dispatch()
    // What the executor does once the handler is done and its completion waits for a batch.
    run('job_1').execution.committing = true
    dispatcher.committed()
    expect(events).toEqual(['start job_1', 'start job_2'])
    expect([dispatcher.active.size, dispatcher.inUse, dispatcher.committing]).toEqual([2, 1, 1])
    await finish('job_1')
    expect([dispatcher.active.size, dispatcher.inUse, dispatcher.committing]).toEqual([1, 1, 0])
    expect(ids(buffer)).toEqual(['job_3'])
  })

  it('frees the slot of an execution that crashed and reports it without a result', async () => {
    const error = vi.spyOn(log, 'error').mockImplementation(() => {})
    const buffer = [preparedJob('job_1', { lockKey: 'lock:order:a' }), preparedJob('job_2', { lockKey: 'lock:order:a' })]
    const { dispatcher, events, finished, finish } = dispatcherOver(buffer, 1)
    dispatcher.dispatch()
    const crash = new Error('handler bug')
    await finish('job_1', crash)
    expect(error.mock.calls).toEqual([['job execution crashed', { jobId: 'job_1', error: crash }]])
    expect(events).toEqual(['start job_1', 'drop job_1', 'start job_2', 'finished job_1'])
    expect(finished.map(([prepared, result]) => [prepared.job.id, result])).toEqual([['job_1', undefined]])
  })

  it('starts nothing while stopping, not when a slot frees nor when a job commits', async () => {
    const buffer = [preparedJob('job_1'), preparedJob('job_2'), preparedJob('job_3')]
    const { dispatcher, events, run, finish, stop } = dispatcherOver(buffer, 2)
    dispatcher.dispatch()
    stop()
    run('job_2').execution.committing = true
    dispatcher.committed()
    await finish('job_1')
    dispatcher.dispatch()
    expect(events).toEqual(['start job_1', 'start job_2', 'drop job_1', 'finished job_1'])
    expect(ids(buffer)).toEqual(['job_3'])
  })
})
