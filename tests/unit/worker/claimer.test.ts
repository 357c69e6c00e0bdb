import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { ClaimedJob } from '../../../server/jobs/store'
import { type Claimer, createClaimer } from '../../../server/jobs/worker/claimer'
import { claimedJob, type Deferred, deferred } from './fakes'

/** Far longer than any test waits: only a wake-up claims. */
const POLL_INTERVAL_MS = 60_000
/** Long enough for a loop that would claim to have claimed. */
const SETTLE_MS = 30

/**
 * A claimer at concurrency 4 and prefetch 8 (capacity 12, refilled at 4 buffered or fewer). Each
 * claim waits for the test to answer it (`answer(count)`); `limits` are the claims' limits.
 * Dispatch leaves the buffer as it is, or with `runAtOnce` empties it (jobs run and done at once).
 * A wake-up claims at once unless `claimCoalesceMs` says otherwise.
 */
function startClaimer(slots = { inUse: 0, committing: 0 }, { runAtOnce = false, claimCoalesceMs = 0 } = {}) {
  const limits: number[] = []
  const pending: Array<Deferred<ClaimedJob[]>> = []
  let claimed = 0
  const dispatched: number[] = []
  const claimer: Claimer<ClaimedJob> = createClaimer<ClaimedJob>({
    store: {
      claim: async (workerId, limit, kinds) => {
        expect([workerId, kinds]).toEqual(['worker-1', ['test.kind']])
        limits.push(limit)
        const answer = deferred<ClaimedJob[]>()
        pending.push(answer)
        return answer.promise
      },
    },
    workerId: 'worker-1',
    kinds: ['test.kind'],
    concurrency: 4,
    prefetch: 8,
    pollIntervalMs: POLL_INTERVAL_MS,
    claimCoalesceMs,
    slots,
    prepare: async claimedJobs => claimedJobs,
    dispatch: () => {
      dispatched.push(claimer.buffer.length)
      if (runAtOnce) claimer.buffer.length = 0
    },
  })
  /** Answers the oldest claim still waiting with `count` jobs. */
  const answer = async (count: number) => {
    await vi.waitFor(() => expect(pending.length).toBeGreaterThan(0))
    pending.shift()!.resolve(Array.from({ length: count }, () => claimedJob({ id: `job_${++claimed}` })))
    await sleep(0)
  }
  claimer.start()
  started.push({ claimer, pending })
  return { claimer, limits, answer, dispatched }
}

const started: Array<{ claimer: Claimer<ClaimedJob>, pending: Array<Deferred<ClaimedJob[]>> }> = []
afterEach(async () => {
  for (const { claimer, pending } of started.splice(0)) {
    const stopping = claimer.stop()
    for (const claim of pending) claim.resolve([])
    await stopping
  }
})

describe('createClaimer', () => {
  it('claims capacity − running − buffered, and hands a claimed batch to dispatch through the buffer', async () => {
    const { claimer, limits, answer, dispatched } = startClaimer({ inUse: 3, committing: 0 })
    await answer(2)
    expect(limits).toEqual([9])
    expect(claimer.buffer.map(job => job.id)).toEqual(['job_1', 'job_2'])
    expect(dispatched).toEqual([2])
    claimer.jobsArrived()
    await answer(0)
    expect(limits).toEqual([9, 7])
  })

  it('does not claim again while the buffer is above the refill threshold (prefetch / 2)', async () => {
    const { claimer, limits, answer } = startClaimer()
    await answer(5)
    claimer.jobsArrived()
    await sleep(SETTLE_MS)
    expect(limits).toEqual([12])
    // Down to 4 buffered: refilled on the next wake-up.
    claimer.buffer.shift()
    claimer.jobsArrived()
    await answer(0)
    expect(limits).toEqual([12, 8])
  })

  it('claims nothing while the completions in flight reach 4 × capacity', async () => {
    const slots = { inUse: 0, committing: 48 }
    const { claimer, limits } = startClaimer(slots)
    await sleep(SETTLE_MS)
    expect(limits).toEqual([])
    slots.committing = 47
    claimer.jobsArrived()
    await vi.waitFor(() => expect(limits).toEqual([12]))
  })

  it('keeps a wake-up that arrives during a claim for the next wait: it claims again', async () => {
    const { claimer, limits, answer } = startClaimer()
    await vi.waitFor(() => expect(limits).toEqual([12]))
    claimer.jobsArrived()
    await answer(0)
    await vi.waitFor(() => expect(limits).toEqual([12, 12]))
    await answer(0)
    // No wake-up since: it waits for the poll interval.
    await sleep(SETTLE_MS)
    expect(limits).toEqual([12, 12])
  })

  it('claims again at once after a full batch, without a wake-up', async () => {
    const { limits, answer } = startClaimer(undefined, { runAtOnce: true })
    await answer(12)
    await vi.waitFor(() => expect(limits).toEqual([12, 12]))
    await answer(3)
    await sleep(SETTLE_MS)
    expect(limits).toEqual([12, 12])
  })

  it('after a drained claim, a freed slot claims nothing', async () => {
    const { claimer, limits, answer } = startClaimer()
    await answer(1)
    claimer.slotFreed()
    await sleep(SETTLE_MS)
    expect(limits).toEqual([12])
    claimer.jobsArrived()
    await answer(0)
    expect(limits).toEqual([12, 11])
  })

  it('after a drained claim, a wake-up claims no sooner than claimCoalesceMs after it; after a full one, at once', async () => {
    const { claimer, limits, answer } = startClaimer(undefined, { claimCoalesceMs: 300 })
    await answer(0)
    const drainedAt = performance.now()
    claimer.jobsArrived()
    claimer.jobsArrived()
    await vi.waitFor(() => expect(limits).toEqual([12, 12]), { timeout: 2_000 })
    // Both wake-ups fell within the wait: one claim, no sooner than 300 ms after the drained one.
    expect(performance.now() - drainedAt).toBeGreaterThanOrEqual(290)
    await answer(12)
    claimer.buffer.length = 0
    const fullAt = performance.now()
    claimer.jobsArrived()
    await vi.waitFor(() => expect(limits).toEqual([12, 12, 12]))
    expect(performance.now() - fullAt).toBeLessThan(200)
  })

  it('after a full claim, a freed slot wakes the loop to refill', async () => {
    const { claimer, limits, answer } = startClaimer()
    await answer(12)
    await sleep(SETTLE_MS)
    expect(limits).toEqual([12])
    claimer.buffer.splice(0, 8)
    claimer.slotFreed()
    await answer(0)
    expect(limits).toEqual([12, 8])
  })

  it('stops: the loop ends and claims no more', async () => {
    const { claimer, limits, answer } = startClaimer()
    await answer(0)
    await claimer.stop()
    expect(claimer.stopping).toBe(true)
    claimer.jobsArrived()
    await sleep(SETTLE_MS)
    expect(limits).toEqual([12])
  })
})
