import { setTimeout as sleep } from 'node:timers/promises'
import { metrics } from '../../observability/metrics'
import type { JobStore } from '../store'
import { type Execution, interrupt } from './executor'
import type { PreparedJob } from './prepare'
import { outcome, type Outcome, type Reporter } from './report'
import type { HeldLock } from './resource-locks'

export interface InterruptionOptions {
  store: Pick<JobStore, 'putBack'>
  buffer: PreparedJob[]
  active: ReadonlyMap<string, Execution>
  reporter: Reporter
  dropLock: (entry: PreparedJob) => Promise<string> | undefined
  lockBusyDelayMs: number
}

/** Claims this worker gives up before their jobs finish: superseded, their lock lost, or at shutdown. */
export function createInterruptions(options: InterruptionOptions) {
  const { store, buffer, active } = options

  /** A claimed job taken out of the buffer before it ran (its claim or lock lost, or shutdown), reported as such. */
  function dropBuffered(entry: PreparedJob, result: Outcome, putBack?: Promise<unknown>): void {
    const index = buffer.indexOf(entry)
    if (index >= 0) buffer.splice(index, 1)
    const started = performance.now()
    options.reporter.untilStopped((putBack ?? Promise.resolve()).catch(() => {}).then(() => options.reporter.report(entry.job, result, started, options.dropLock(entry))))
  }

  return {
    dropBuffered,

    /** Another worker may hold the resource now: its jobs here step back without spending the attempt. */
    lockLost(held: HeldLock): void {
      for (const execution of active.values()) {
        if (execution.prepared.lock !== held) continue
        metrics.locksLost.inc({ kind: execution.prepared.job.kind })
        interrupt(execution, 'lock_lost')
      }
      for (const entry of buffer.filter(entry => entry.lock === held)) {
        metrics.locksLost.inc({ kind: entry.job.kind })
        dropBuffered(entry, outcome('lock_lost', { lockKey: held.key, lockResult: 'lost' }, 'warn'), store.putBack(entry.job, options.lockBusyDelayMs))
      }
    },

    /**
     * Buffered jobs go back at once; running ones get `graceMs` to finish, then are interrupted and
     * put back. Answers how many were given back.
     */
    async releaseAll(graceMs: number): Promise<number> {
      // Buffered jobs never started: back to the queue at once, for another worker.
      const buffered = [...buffer]
      for (const entry of buffered) dropBuffered(entry, outcome('released', { reason: 'shutdown' }), store.putBack(entry.job, 0))
      const finishing = [...active.values()]
      await Promise.race([Promise.allSettled(finishing.map(e => e.done)), sleep(graceMs)])
      const unfinished = [...active.values()]
      for (const execution of unfinished) interrupt(execution, 'shutdown')
      // Released here, not by the handler, so a handler stuck in a call still leaves no orphaned row;
      // the fence makes its late commit a no-op.
      await Promise.allSettled(unfinished.map(e => store.putBack(e.prepared.job, 0)))
      await Promise.race([Promise.allSettled(unfinished.map(e => e.done)), sleep(2000)])
      return unfinished.length + buffered.length
    },
  }
}
