import { setTimeout as sleep } from 'node:timers/promises'
import { z } from 'zod'
import type { Database, DatabaseHandle } from '../db/client'
import { LockBackendError, type Locks } from '../locks/types'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { type BackoffPolicy, backoffMs } from './backoff'
import { classify, describeError, FencedOutError, JobInterrupted, PermanentJobError, SnoozeJob } from './errors'
import { injectJobFailure, readJobFaults } from './faults'
import type { JobContext, JobKind } from './kind'
import { type ClaimedJob, createJobStore } from './store'
import { JOBS_CHANNEL, onLocalWake } from './wake'

export interface WorkerOptions {
  db: Database
  notifications?: DatabaseHandle['notifications']
  locks: Locks
  kinds: JobKind[]
  workerId: string
  concurrency: number
  pollIntervalMs: number
  heartbeatTimeoutMs: number
  lockTtlMs: number
  lockBusyDelayMs: number
  backoff: BackoffPolicy
  faultsEnabled: boolean
}

export interface Worker {
  start(): Promise<void>
  /** Stops claiming; running jobs get `graceMs` to finish, then are released with their attempt given back. */
  stop(graceMs: number): Promise<void>
  readonly running: number
}

type Finish = (transition: string, extra?: Record<string, unknown>, level?: 'info' | 'warn') => void

interface Execution {
  job: ClaimedJob
  controller: AbortController
  done: Promise<void>
}

/**
 * The job runner: claims due jobs up to its concurrency with FOR UPDATE SKIP LOCKED, runs each
 * under a lock on its business resource, heart-beats the claim, and records the outcome — all
 * conditional on the claim's fence token. Wakes on NOTIFY (postgres.js) or in-process signals,
 * and polls as a fallback.
 */
export function createWorker(options: WorkerOptions): Worker {
  const store = createJobStore(options.db)
  const kinds = new Map(options.kinds.map(kind => [kind.kind, kind]))
  const kindNames = [...kinds.keys()]
  const active = new Map<string, Execution>()
  const cleanups: Array<() => Promise<void> | void> = []
  let stopping = false
  let loopDone: Promise<void> = Promise.resolve()
  let wakeUp: (() => void) | undefined
  // A wake-up that arrives while the loop is claiming is kept for its next wait, not lost.
  let wokenWhileBusy = false
  const wake = () => {
    if (wakeUp) wakeUp()
    else wokenWhileBusy = true
  }

  function waitForWake(ms: number): Promise<void> {
    if (wokenWhileBusy) {
      wokenWhileBusy = false
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        wakeUp = undefined
        resolve()
      }
      wakeUp = done
    })
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      const free = options.concurrency - active.size
      if (free > 0) {
        let claimed: ClaimedJob[] = []
        try {
          claimed = await store.claim(options.workerId, free, kindNames)
        }
        catch (error) {
          log.warn('job claim failed; retrying after the poll interval', { worker: options.workerId, error })
        }
        for (const job of claimed) run(job)
        // A full batch means more may be due: claim again at once.
        if (claimed.length === free && !stopping) continue
      }
      await waitForWake(options.pollIntervalMs)
    }
  }

  function run(job: ClaimedJob): void {
    const controller = new AbortController()
    const done = execute(job, controller).catch(error => log.error('job execution crashed', { jobId: job.id, error }))
      .finally(() => {
        active.delete(job.id)
        wake()
      })
    active.set(job.id, { job, controller, done })
  }

  async function execute(job: ClaimedJob, controller: AbortController): Promise<void> {
    const started = performance.now()
    const fields = { jobId: job.id, kind: job.kind, attempt: job.attempt, fence: job.fence, worker: options.workerId, resourceId: job.resourceId, queueWaitMs: job.queueWaitMs }
    // Queue wait: from run_at (when it became due) to this claim, as the claim query measured it.
    metrics.jobQueueWait.observe({ kind: job.kind }, job.queueWaitMs / 1000)
    // The outcome is reported once the lock is given back, so its line carries the release too.
    let outcome: { transition: string, extra: Record<string, unknown>, level: 'info' | 'warn' } | undefined
    const finish: Finish = (transition, extra = {}, level = 'info') => {
      outcome = { transition, extra, level }
    }
    const faults = readJobFaults(job, options.faultsEnabled)
    const timers: NodeJS.Timeout[] = []
    // The stall fault freezes the worker: no heartbeat, no lock renewal, as in a GC pause.
    let paused = false
    let committed = false
    let lock: { key: string, token?: string } | undefined

    const interrupt = (reason: JobInterrupted['reason']) => {
      if (!controller.signal.aborted && !committed) controller.abort(new JobInterrupted(reason))
    }
    const context: JobContext = {
      job,
      signal: controller.signal,
      db: options.db,
      async commit(work) {
        if (faults.stallMs && job.attempt === 1) {
          paused = true
          log.warn('job stalling (test fault): heartbeat and lock renewal paused', { ...fields, stallMs: faults.stallMs })
          await sleep(faults.stallMs, undefined, { signal: controller.signal })
          paused = false
        }
        controller.signal.throwIfAborted()
        if (!await store.complete(job, work)) throw new FencedOutError(`job ${job.id}: fence ${job.fence} is no longer current; nothing written`)
        committed = true
      },
    }

    try {
      // Claimed by kind: this worker runs every kind it claims.
      const kind = kinds.get(job.kind)!
      const payload = kind.payload.safeParse(job.payload)
      if (!payload.success) throw new PermanentJobError(`invalid payload: ${z.prettifyError(payload.error)}`)
      injectJobFailure(job, faults)

      if (kind.resource) {
        const lockKey = `lock:${kind.resource(payload.data)}`
        const acquired = await acquireResourceLock(lockKey)
        if (acquired === 'busy') {
          await store.putBack(job, options.lockBusyDelayMs * (1 + Math.random()))
          return finish('lock_busy', { lockKey, lockResult: 'busy' })
        }
        lock = { key: lockKey, token: acquired.token }
        if (acquired.token) timers.push(renewLockWhileRunning(job, lockKey, acquired.token, () => paused, interrupt))
      }
      timers.push(heartbeatWhileRunning(job, () => paused, interrupt))

      await kind.run(context, payload.data)
      if (!committed) await context.commit(async () => {})
      finish('completed', { lockKey: lock?.key, lockResult: lockResult(lock) })
    }
    catch (error) {
      // Committed: the outcome is stored and a late interruption changes nothing.
      if (committed) return finish('completed', { lockKey: lock?.key, lockResult: lockResult(lock) })
      const interruption = controller.signal.reason instanceof JobInterrupted ? controller.signal.reason : undefined
      await settleFailedAttempt(job, error, interruption, { finish, lockKey: lock?.key, snoozeFault: faults.snoozeMs !== undefined })
    }
    finally {
      for (const timer of timers) clearInterval(timer)
      const lockRelease = lock?.token ? await releaseResourceLock(lock.key, lock.token) : undefined
      if (outcome) {
        const seconds = (performance.now() - started) / 1000
        metrics.jobResults.inc({ kind: job.kind, result: outcome.transition })
        metrics.jobProcessing.observe({ kind: job.kind, result: outcome.transition }, seconds)
        log[outcome.level]('job attempt finished', {
          ...fields,
          lockKey: lock?.key,
          lockResult: lockResult(lock),
          ...outcome.extra,
          lockRelease,
          transition: outcome.transition,
          durationMs: Math.round(seconds * 1000),
        })
      }
    }
  }

  /** released; expired: the lock was no longer ours (TTL ran out, taken over); error: no answer. */
  async function releaseResourceLock(key: string, token: string): Promise<'released' | 'expired' | 'error'> {
    const result = await options.locks.release(key, token).then(held => (held ? 'released' : 'expired'), () => 'error' as const)
    metrics.lockReleases.inc({ result })
    return result
  }

  /** Extends the lock every third of its TTL; a renewal that finds it gone interrupts the job. */
  function renewLockWhileRunning(job: ClaimedJob, key: string, token: string, paused: () => boolean, interrupt: (reason: 'lock_lost') => void): NodeJS.Timeout {
    return setInterval(() => {
      if (paused()) return
      options.locks.extend(key, token, options.lockTtlMs).then((held) => {
        if (held) return
        metrics.locksLost.inc({ kind: job.kind })
        interrupt('lock_lost')
      }, (error) => {
        if (!(error instanceof LockBackendError)) return
        log.warn('lock renewal failed: lock backend unavailable; the Postgres fence still protects the work', { jobId: job.id, worker: options.workerId, lockKey: key })
      })
    }, Math.max(10, Math.floor(options.lockTtlMs / 3)))
  }

  /** Heart-beats the claim every third of the timeout; a claim found superseded interrupts the job. */
  function heartbeatWhileRunning(job: ClaimedJob, paused: () => boolean, interrupt: (reason: 'fenced_out') => void): NodeJS.Timeout {
    return setInterval(() => {
      if (paused()) return
      // A failed heartbeat (database away) is retried on the next tick; rescue waits for the timeout.
      store.heartbeat(job).then(current => current || interrupt('fenced_out'), () => {})
    }, Math.max(10, Math.floor(options.heartbeatTimeoutMs / 3)))
  }

  /** Records why an attempt did not complete: fenced out, released, put back, snoozed, retried or dead-lettered. */
  async function settleFailedAttempt(
    job: ClaimedJob,
    error: unknown,
    interruption: JobInterrupted | undefined,
    { finish, lockKey, snoozeFault }: { finish: Finish, lockKey?: string, snoozeFault: boolean },
  ): Promise<void> {
    // The fence's verdict comes first: whatever else happened, this claim is no longer ours.
    if (error instanceof FencedOutError || interruption?.reason === 'fenced_out') {
      return finish('fenced_out', { error: describeError(error) }, 'warn')
    }
    // stop() already released the job.
    if (interruption?.reason === 'shutdown') return finish('released', { reason: 'shutdown' })
    if (interruption?.reason === 'lock_lost') {
      // Another worker may hold the resource now: step back without spending the attempt.
      const putBack = await store.putBack(job, options.lockBusyDelayMs).catch(() => false)
      return finish(putBack ? 'lock_lost' : 'fenced_out', { lockKey, lockResult: 'lost' }, 'warn')
    }
    if (error instanceof SnoozeJob) {
      await store.putBack(job, error.delayMs, { clearFaults: snoozeFault })
      return finish('snoozed', { delayMs: error.delayMs, reason: error.message })
    }
    const errorClass = classify(error)
    const message = describeError(error)
    metrics.jobErrors.inc({ kind: job.kind, error_class: errorClass })
    const retryInMs = backoffMs(job.attempt, options.backoff)
    const status = await store.fail(job, { errorClass, message, retryInMs, permanent: errorClass === 'permanent' })
    if (status === 'dead_letter') {
      metrics.jobsDeadLettered.inc({ kind: job.kind })
      return finish('dead_letter', { errorClass, error: message }, 'warn')
    }
    if (status === 'failed') return finish('retry', { errorClass, error: message, retryInMs }, 'warn')
    finish('fenced_out', { error: message }, 'warn')
  }

  /** A token; 'busy' when another holds the resource; no token when the backend is unreachable (degraded). */
  async function acquireResourceLock(key: string): Promise<{ token?: string } | 'busy'> {
    const started = performance.now()
    const count = (result: 'acquired' | 'busy' | 'degraded') => {
      metrics.lockAcquires.inc({ result })
      metrics.lockWait.observe({ result }, (performance.now() - started) / 1000)
    }
    try {
      const token = await options.locks.acquire(key, options.lockTtlMs)
      count(token ? 'acquired' : 'busy')
      return token ? { token } : 'busy'
    }
    catch (error) {
      if (!(error instanceof LockBackendError)) throw error
      // Degrade instead of stalling every job: the fence token and the side-effect markers in
      // Postgres still make a concurrent run harmless.
      count('degraded')
      log.warn('lock backend unavailable; running on the Postgres fence alone', { lockKey: key, worker: options.workerId })
      return {}
    }
  }

  return {
    async start() {
      cleanups.push(onLocalWake(wake))
      if (options.notifications) {
        try {
          cleanups.push(await options.notifications.listen(JOBS_CHANNEL, wake))
        }
        catch (error) {
          log.warn('LISTEN failed; the worker polls only', { worker: options.workerId, error })
        }
      }
      loopDone = loop()
      log.info('worker started', { worker: options.workerId, concurrency: options.concurrency, listening: cleanups.length > 1 })
    },

    async stop(graceMs) {
      stopping = true
      wake()
      await loopDone
      const finishing = [...active.values()]
      await Promise.race([Promise.allSettled(finishing.map(e => e.done)), sleep(graceMs)])
      const unfinished = [...active.values()]
      for (const execution of unfinished) execution.controller.abort(new JobInterrupted('shutdown'))
      // Released here, not by the handler, so a handler stuck in a call still leaves no orphaned row;
      // the fence makes its late commit a no-op.
      await Promise.allSettled(unfinished.map(e => store.putBack(e.job, 0)))
      await Promise.race([Promise.allSettled(unfinished.map(e => e.done)), sleep(2000)])
      await Promise.allSettled(cleanups.map(cleanup => cleanup()))
      log.info('worker stopped', { worker: options.workerId, released: unfinished.length })
    },

    get running() {
      return active.size
    },
  }
}

function lockResult(lock: { key: string, token?: string } | undefined): string | undefined {
  if (!lock) return undefined
  return lock.token ? 'acquired' : 'degraded'
}
