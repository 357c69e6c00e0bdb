import { setTimeout as sleep } from 'node:timers/promises'
import type { Database } from '@idempotent-checkout/db-kit'
import { log } from '../../observability/logger'
import { metrics } from '../../observability/metrics'
import { FencedOutError, JobInterrupted } from '../errors'
import { readJobFaults } from '../faults'
import type { JobContext } from '../kind'
import type { ClaimedJob, JobEffect, JobStore } from '../store'
import type { PreparedJob } from './prepare'
import { outcome, type Outcome } from './report'
import type { HeldLock } from './resource-locks'
import { nextStep, type RetryOptions } from './retry-policy'

export interface Execution {
  prepared: PreparedJob
  controller: AbortController
  /** The stall fault: heartbeat and lock renewal skip this job, as in a GC pause. */
  paused: boolean
  /** Its handler is done and its completion waits in (or for) a batch: its slot is free for the next job. */
  committing: boolean
  done: Promise<void>
}

export interface ExecutorOptions extends RetryOptions {
  store: Pick<JobStore, 'complete' | 'putBack' | 'fail'>
  /** The batch completer's. */
  complete: (job: ClaimedJob, effect: JobEffect | undefined) => Promise<boolean>
  /** A handler is done and its completion is on its way: its slot may take the next job. */
  committing: () => void
  db: Database
  workerId: string
  lockBusyDelayMs: number
  faultsEnabled: boolean
}

export function interrupt(execution: Execution, reason: JobInterrupted['reason']): void {
  if (!execution.controller.signal.aborted) execution.controller.abort(new JobInterrupted(reason))
}

function lockResult(lock: HeldLock | undefined): string | undefined {
  if (!lock) return undefined
  return lock.token ? 'acquired' : 'degraded'
}

/** Writes the retry policy's step for an attempt that did not complete. */
async function settleFailedAttempt(options: ExecutorOptions, job: ClaimedJob, error: unknown, interruption: JobInterrupted | undefined, lockKey: string | undefined, snoozeFault: boolean): Promise<Outcome> {
  const next = nextStep(job, error, interruption?.reason, options)
  switch (next.step) {
    case 'fenced_out':
      return outcome('fenced_out', { error: next.error }, 'warn')
    case 'released':
      return outcome('released', { reason: 'shutdown' })
    case 'put_back_lock_lost': {
      const putBack = await options.store.putBack(job, options.lockBusyDelayMs).catch(() => false)
      return outcome(putBack ? 'lock_lost' : 'fenced_out', { lockKey, lockResult: 'lost' }, 'warn')
    }
    case 'snooze':
      await options.store.putBack(job, next.delayMs, { clearFaults: snoozeFault, snooze: true })
      return outcome('snoozed', { delayMs: next.delayMs, askedMs: next.askedMs, snoozes: job.snoozes + 1, reason: next.reason })
  }
  const { errorClass, message, retryInMs, permanent } = next
  metrics.jobErrors.inc({ kind: job.kind, error_class: errorClass })
  const status = await options.store.fail(job, { errorClass, message, retryInMs, permanent })
  if (status === 'dead_letter') {
    metrics.jobsDeadLettered.inc({ kind: job.kind })
    return outcome('dead_letter', { errorClass, error: message }, 'warn')
  }
  if (status === 'failed') return outcome('retry', { errorClass, error: message, retryInMs }, 'warn')
  return outcome('fenced_out', { error: message }, 'warn')
}

/** Runs one prepared job to its outcome: completed and committed under its fence, put back, or failed. */
export async function execute(options: ExecutorOptions, execution: Execution): Promise<Outcome> {
  const { prepared: { job, kind, payload, loaded, failure, lock, lockBusy }, controller } = execution
  // Queue wait: from run_at (when it became due) to this claim, as the claim query measured it.
  metrics.jobQueueWait.observe({ kind: job.kind }, job.queueWaitMs / 1000)
  const faults = readJobFaults(job, options.faultsEnabled)
  let committed = false

  async function fenced(write: () => Promise<boolean>, batched: boolean): Promise<void> {
    if (faults.stallMs && job.attempt === 1) {
      execution.paused = true
      log.warn('job stalling (test fault): heartbeat and lock renewal paused', { jobId: job.id, worker: options.workerId, stallMs: faults.stallMs })
      await sleep(faults.stallMs, undefined, { signal: controller.signal })
      execution.paused = false
    }
    controller.signal.throwIfAborted()
    if (batched && !execution.committing) {
      execution.committing = true
      options.committing()
    }
    if (!await write()) throw new FencedOutError(`job ${job.id}: fence ${job.fence} is no longer current; nothing written`)
    committed = true
  }
  const context: JobContext = {
    job,
    signal: controller.signal,
    db: options.db,
    complete: effect => fenced(() => options.complete(job, effect), true),
    commit: work => fenced(() => options.store.complete(job, work), false),
  }
  const locked = { lockKey: lock || lockBusy ? execution.prepared.lockKey : undefined, lockResult: lockBusy ? 'busy' : lockResult(lock) }

  try {
    if (failure) throw failure
    if (lockBusy) {
      await options.store.putBack(job, options.lockBusyDelayMs * (1 + Math.random()))
      return outcome('lock_busy', locked)
    }
    await kind.run(context, payload, loaded)
    if (!committed) await context.complete()
    return outcome('completed', locked)
  }
  catch (error) {
    // Committed: the outcome is stored and a late interruption changes nothing.
    if (committed) return outcome('completed', locked)
    const interruption = controller.signal.reason instanceof JobInterrupted ? controller.signal.reason : undefined
    const settled = await settleFailedAttempt(options, job, error, interruption, lock?.key, faults.snoozeMs !== undefined)
    return { ...settled, extra: { ...locked, ...settled.extra } }
  }
}
