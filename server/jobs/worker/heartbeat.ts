import type { JobStore } from '../store'
import type { Execution } from './executor'
import type { PreparedJob } from './prepare'

export interface HeartbeatOptions {
  store: Pick<JobStore, 'heartbeatAll'>
  active: ReadonlyMap<string, Execution>
  buffer: readonly PreparedJob[]
  /** A running job whose claim was superseded (rescued, maybe claimed again). */
  fencedOut: (execution: Execution) => void
  /** A buffered job whose claim was superseded, still in the buffer. */
  superseded: (entry: PreparedJob) => void
}

/** Heart-beats every claim this worker holds (running or buffered) in one statement; call it every third of the timeout. */
export function createHeartbeat(options: HeartbeatOptions): () => void {
  const { store, active, buffer } = options
  let heartbeating = false
  return function heartbeatClaims(): void {
    // One heartbeat at a time: one that waits on locked rows must not be joined by the next.
    if (heartbeating) return
    const running = [...active.values()].filter(execution => !execution.paused)
    // The buffer as sent: jobs claimed while the heartbeat is out are not in its answer.
    const buffered = [...buffer]
    const claims = [...buffered.map(entry => entry.job), ...running.map(execution => execution.prepared.job)]
    if (claims.length === 0) return
    heartbeating = true
    // A failed heartbeat (database away) is retried on the next tick; rescue waits for the timeout.
    store.heartbeatAll(claims).then((current) => {
      for (const execution of running) {
        if (!current.has(execution.prepared.job.fence)) options.fencedOut(execution)
      }
      for (const entry of buffered) {
        if (!current.has(entry.job.fence) && buffer.includes(entry)) options.superseded(entry)
      }
    }, () => {}).finally(() => { heartbeating = false })
  }
}
