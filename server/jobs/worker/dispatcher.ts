import { log } from '../../observability/logger'
import type { Execution } from './executor'
import type { PreparedJob } from './prepare'
import type { Outcome } from './report'

export interface DispatcherOptions {
  concurrency: number
  /** The claimer's buffer, in claim order. */
  buffer: PreparedJob[]
  stopping: () => boolean
  execute: (execution: Execution) => Promise<Outcome>
  /** Gives back the job's share of its resource lock; the release's result when it was the last holder. */
  dropLock: (prepared: PreparedJob) => Promise<string> | undefined
  /** Its slot is free and refilled; `result` is undefined when the execution crashed. */
  finished: (prepared: PreparedJob, result: Outcome | undefined, started: number, release: Promise<string> | undefined) => void
}

/** The worker's slots: buffered jobs start in claim order while slots are free, one at a time per resource. */
export function createDispatcher(options: DispatcherOptions) {
  const { buffer } = options
  const active = new Map<string, Execution>()
  const runningKeys = new Set<string>()
  let committing = 0

  function dispatch(): void {
    while (!options.stopping() && active.size - committing < options.concurrency) {
      const index = buffer.findIndex(entry => !entry.lockKey || !runningKeys.has(entry.lockKey))
      if (index < 0) return
      run(buffer.splice(index, 1)[0]!)
    }
  }

  function run(prepared: PreparedJob): void {
    const { job, lockKey } = prepared
    const started = performance.now()
    const execution: Execution = { prepared, controller: new AbortController(), paused: false, committing: false, done: Promise.resolve() }
    active.set(job.id, execution)
    if (lockKey) runningKeys.add(lockKey)
    execution.done = options.execute(execution)
      .catch((error) => {
        log.error('job execution crashed', { jobId: job.id, error })
        return undefined
      })
      .then((result) => {
        // The slot is free once the outcome is stored; the lock goes back without being waited for.
        if (execution.committing) committing--
        active.delete(job.id)
        if (lockKey) runningKeys.delete(lockKey)
        const release = options.dropLock(prepared)
        dispatch()
        options.finished(prepared, result, started, release)
      })
  }

  return {
    active: active as ReadonlyMap<string, Execution>,
    /** Slots taken: running jobs, not counting those whose completion is on its way. */
    get inUse() {
      return active.size - committing
    },
    get committing() {
      return committing
    },
    dispatch,
    /** A handler is done and its completion waits for a batch: its slot takes the next job. */
    committed(): void {
      committing++
      dispatch()
    },
  }
}
