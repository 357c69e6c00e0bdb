import { describe, expect, it } from 'vitest'
import type { ClaimedJob, JobEffect } from '../../../server/jobs/store'
import { type CompletionStore, createCompleter, MAX_COMPLETION_BATCH } from '../../../server/jobs/worker/completer'
import { claimedJob, deferred } from './fakes'

type Entry = { job: ClaimedJob, effect?: JobEffect }

/**
 * Records what the completer sends. completeAll answers false for a job named in `fencedOut` and
 * rejects when a job is named in `failing`; completeWith rejects for a job in `failing`. The first
 * completeAll waits for `firstBatch` when given.
 */
function fakeStore(options: { fencedOut?: string[], failing?: string[], firstBatch?: Promise<unknown> } = {}) {
  const calls: Array<{ completeAll: string[] } | { completeWith: string }> = []
  const fails = (id: string) => options.failing?.includes(id) ?? false
  const store: CompletionStore = {
    async completeAll(entries: readonly Entry[]) {
      const first = !calls.some(call => 'completeAll' in call)
      calls.push({ completeAll: entries.map(entry => entry.job.id) })
      if (first && options.firstBatch) await options.firstBatch
      if (entries.some(entry => fails(entry.job.id))) throw new Error('effect failed')
      return entries.map(entry => !options.fencedOut?.includes(entry.job.id))
    },
    async completeWith(job: ClaimedJob) {
      calls.push({ completeWith: job.id })
      if (fails(job.id)) throw new Error(`effect of ${job.id} failed`)
      return !options.fencedOut?.includes(job.id)
    },
  }
  return { store, calls }
}

const jobs = (count: number, from = 1) => Array.from({ length: count }, (_, i) => claimedJob({ id: `job_${from + i}`, fence: from + i }))
const ids = (count: number, from = 1) => jobs(count, from).map(job => job.id)

describe('createCompleter', () => {
  it('sends the completions of one tick in one completeAll, each answered by its own result', async () => {
    const { store, calls } = fakeStore({ fencedOut: ['job_2'] })
    const { complete } = createCompleter(store)
    const results = await Promise.all(jobs(3).map(job => complete(job, undefined)))
    expect(calls).toEqual([{ completeAll: ['job_1', 'job_2', 'job_3'] }])
    expect(results).toEqual([true, false, true])
  })

  it('sends a single completion with completeWith, its effect along', async () => {
    const { store, calls } = fakeStore()
    const seen: Array<JobEffect | undefined> = []
    const effect = { text: 'mail as (select 1 from done)', params: [] }
    const { complete } = createCompleter({
      ...store,
      completeWith: (job, given) => {
        seen.push(given)
        return store.completeWith(job, given)
      },
    })
    expect(await complete(claimedJob({ id: 'job_1' }), effect)).toBe(true)
    expect(calls).toEqual([{ completeWith: 'job_1' }])
    expect(seen).toEqual([effect])
  })

  it('splits more than 100 into transactions of at most 100, one after another', async () => {
    expect(MAX_COMPLETION_BATCH).toBe(100)
    const { store, calls } = fakeStore()
    const { complete } = createCompleter(store)
    const results = await Promise.all(jobs(201).map(job => complete(job, undefined)))
    expect(calls).toEqual([{ completeAll: ids(100) }, { completeAll: ids(100, 101) }, { completeWith: 'job_201' }])
    expect(results.every(Boolean)).toBe(true)
  })

  it('retries a failed batch one by one, so only the failing completion rejects', async () => {
    const { store, calls } = fakeStore({ failing: ['job_2'] })
    const { complete } = createCompleter(store)
    const results = await Promise.allSettled(jobs(3).map(job => complete(job, undefined)))
    expect(calls).toEqual([{ completeAll: ['job_1', 'job_2', 'job_3'] }, { completeWith: 'job_1' }, { completeWith: 'job_2' }, { completeWith: 'job_3' }])
    expect(results.map(result => result.status === 'fulfilled' ? result.value : (result.reason as Error).message))
      .toEqual([true, 'effect of job_2 failed', true])
  })

  it('gathers the completions that arrive while a batch is in flight into the next batch', async () => {
    const firstBatch = deferred<undefined>()
    const { store, calls } = fakeStore({ firstBatch: firstBatch.promise })
    const { complete } = createCompleter(store)
    const first = jobs(2).map(job => complete(job, undefined))
    await Promise.resolve()
    await Promise.resolve()
    expect(calls).toEqual([{ completeAll: ['job_1', 'job_2'] }])
    const later = jobs(3, 3).map(job => complete(job, undefined))
    await new Promise(resolve => setTimeout(resolve, 5))
    expect(calls).toHaveLength(1)
    firstBatch.resolve(undefined)
    await Promise.all([...first, ...later])
    expect(calls).toEqual([{ completeAll: ['job_1', 'job_2'] }, { completeAll: ['job_3', 'job_4', 'job_5'] }])
  })
})
