import { log } from '../../observability/logger'
import type { ClaimedJob, JobStore } from '../store'
import { createPacer, type PacerOptions } from './pacer'

/** The worker's slots as the claimer sees them. */
export interface Slots {
  /** Jobs running, not counting those whose completion is on its way. */
  readonly inUse: number
  readonly committing: number
}

/** When to claim (`PacerOptions`: the poll interval and the claim wait), and what with. */
export interface ClaimerOptions<Prepared> extends PacerOptions {
  store: Pick<JobStore, 'claim'>
  workerId: string
  kinds: string[]
  concurrency: number
  /** Claimed beyond the free slots and held in the buffer, so a finished slot refills without a round trip. */
  prefetch: number
  slots: Slots
  prepare: (claimed: ClaimedJob[]) => Promise<Prepared[]>
  /** Starts buffered jobs in the free slots. */
  dispatch: () => void
}

/** Claims due jobs in batches into a local buffer as slots free up, up to the concurrency plus the prefetch. */
export function createClaimer<Prepared>(options: ClaimerOptions<Prepared>) {
  const { store, slots } = options
  const buffer: Prepared[] = []
  const pacer = createPacer(options)
  const capacity = options.concurrency + options.prefetch
  // Refilled when the buffer runs this low, so claims come in batches rather than one per finished job.
  const refillBelow = Math.floor(options.prefetch / 2)
  // Finished handlers whose completions are in flight are bounded too: beyond this the worker stops claiming.
  const maxCommitting = 4 * capacity
  let stopping = false
  let loopDone: Promise<void> = Promise.resolve()

  async function loop(): Promise<void> {
    while (!stopping) {
      const wanted = capacity - slots.inUse - buffer.length
      let full = false
      if (wanted > 0 && buffer.length <= refillBelow && slots.committing < maxCommitting) {
        let claimed: ClaimedJob[] = []
        pacer.claiming()
        try {
          claimed = await store.claim(options.workerId, wanted, options.kinds)
        }
        catch (error) {
          log.warn('job claim failed; retrying after the poll interval', { worker: options.workerId, error })
        }
        if (claimed.length > 0) {
          buffer.push(...await options.prepare(claimed))
          options.dispatch()
        }
        // A full batch means more may be due: claim again as soon as there is room.
        full = claimed.length === wanted
        pacer.claimed(full)
      }
      if (!full) await pacer.idle()
    }
  }

  return {
    /** Claimed jobs not started yet, in claim order. */
    buffer,
    get stopping() {
      return stopping
    },
    jobsArrived: pacer.jobsArrived,
    slotFreed: pacer.slotFreed,
    start(): void {
      loopDone = loop()
    },
    /** Stops claiming; resolves once the loop is out. */
    async stop(): Promise<void> {
      stopping = true
      pacer.wake()
      await loopDone
    },
  }
}

export type Claimer<Prepared> = ReturnType<typeof createClaimer<Prepared>>
