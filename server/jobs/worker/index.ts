import type { Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { log } from '../../observability/logger'
import type { BackoffPolicy } from '../backoff'
import type { JobKind } from '../kind'
import { createJobStore } from '../store'
import { JOBS_CHANNEL, onLocalWake } from '../wake'
import { createClaimer } from './claimer'
import { createCompleter } from './completer'
import { createDispatcher } from './dispatcher'
import { execute, type ExecutorOptions, interrupt } from './executor'
import { createHeartbeat } from './heartbeat'
import { createInterruptions } from './interruptions'
import { type PreparedJob, prepareBatch } from './prepare'
import { createReporter, outcome } from './report'
import type { PacerOptions } from './pacer'
import { createLockKeeper } from './resource-locks'

/** `PacerOptions`: the poll interval and the claim wait (docs/architecture.md#the-worker). */
export interface WorkerOptions extends PacerOptions {
  db: Database
  notifications?: DatabaseHandle['notifications']
  locks: Locks
  kinds: JobKind[]
  workerId: string
  concurrency: number
  /** Claimed beyond the free slots and held in a local buffer, so a finished slot refills without a round trip. */
  prefetch: number
  heartbeatTimeoutMs: number
  lockTtlMs: number
  lockBusyDelayMs: number
  backoff: BackoffPolicy
  /** A job may snooze `max` times, each for at most `maxDelayMs`; the next snooze counts as a failed attempt. */
  snooze: { max: number, maxDelayMs: number }
  faultsEnabled: boolean
}

export interface Worker {
  start(): Promise<void>
  /**
   * Stops claiming and gives buffered jobs back at once; running jobs get `graceMs` to finish, then
   * are released. Either way with their attempt given back.
   */
  stop(graceMs: number): Promise<void>
  readonly running: number
}

/** The pieces, wired: each reaches its neighbours through the callbacks given here. */
function assemble(options: WorkerOptions) {
  const store = createJobStore(options.db)
  const kinds = new Map(options.kinds.map(kind => [kind.kind, kind]))
  const reporter = createReporter(options.workerId)
  const lockKeeper = createLockKeeper({
    locks: options.locks,
    lockTtlMs: options.lockTtlMs,
    workerId: options.workerId,
    paused: held => [...dispatcher.active.values()].some(execution => execution.paused && execution.prepared.lock === held),
    lost: held => interruptions.lockLost(held),
  })
  const prepareOptions = { db: options.db, kinds, faultsEnabled: options.faultsEnabled, lockAll: lockKeeper.lockAll }
  const claimer = createClaimer<PreparedJob>({
    store,
    workerId: options.workerId,
    kinds: [...kinds.keys()],
    concurrency: options.concurrency,
    prefetch: options.prefetch,
    pollIntervalMs: options.pollIntervalMs,
    claimCoalesceMs: options.claimCoalesceMs,
    slots: {
      get inUse() { return dispatcher.inUse },
      get committing() { return dispatcher.committing },
    },
    prepare: claimed => prepareBatch(claimed, prepareOptions),
    dispatch: () => dispatcher.dispatch(),
  })
  const completer = createCompleter(store)
  const executorOptions: ExecutorOptions = {
    ...options,
    store,
    complete: completer.complete,
    committing: () => dispatcher.committed(),
  }
  const dispatcher = createDispatcher({
    concurrency: options.concurrency,
    buffer: claimer.buffer,
    stopping: () => claimer.stopping,
    execute: execution => execute(executorOptions, execution),
    dropLock: lockKeeper.drop,
    finished: (prepared, result, started, release) => {
      claimer.slotFreed()
      if (result) reporter.report(prepared.job, result, started, release)
    },
  })
  const interruptions = createInterruptions({ store, buffer: claimer.buffer, active: dispatcher.active, reporter, dropLock: lockKeeper.drop, lockBusyDelayMs: options.lockBusyDelayMs })
  const heartbeat = createHeartbeat({
    store,
    active: dispatcher.active,
    buffer: claimer.buffer,
    fencedOut: execution => interrupt(execution, 'fenced_out'),
    superseded: entry => interruptions.dropBuffered(entry, outcome('fenced_out', { error: 'claim superseded while buffered' }, 'warn')),
  })
  return { claimer, dispatcher, lockKeeper, reporter, interruptions, heartbeat }
}

/**
 * The job runner. Claims due jobs in batches (one statement, FOR UPDATE SKIP LOCKED, each claim
 * under a fresh fence token) up to its concurrency plus a small prefetch buffer; reads what a
 * batch needs in one query per loader; takes the batch's resource locks in one pipelined write;
 * heart-beats all its claims in one statement and renews all its locks on one timer; and records
 * each outcome conditional on the fence — a completion and its effect in one statement where the
 * kind allows. Wakes on NOTIFY (postgres.js) or in-process signals, and polls as a fallback.
 */
export function createWorker(options: WorkerOptions): Worker {
  const { claimer, dispatcher, lockKeeper, reporter, interruptions, heartbeat } = assemble(options)
  const cleanups: Array<() => Promise<void> | void> = []
  const timers: NodeJS.Timeout[] = []
  return {
    async start() {
      cleanups.push(onLocalWake(claimer.jobsArrived))
      if (options.notifications) {
        try {
          cleanups.push(await options.notifications.listen(JOBS_CHANNEL, claimer.jobsArrived))
        }
        catch (error) {
          log.warn('LISTEN failed; the worker polls only', { worker: options.workerId, error })
        }
      }
      timers.push(setInterval(heartbeat, Math.max(10, Math.floor(options.heartbeatTimeoutMs / 3))))
      timers.push(setInterval(lockKeeper.renew, Math.max(10, Math.floor(options.lockTtlMs / 3))))
      claimer.start()
      log.info('worker started', { worker: options.workerId, concurrency: options.concurrency, prefetch: options.prefetch, listening: cleanups.length > 1 })
    },

    async stop(graceMs) {
      await claimer.stop()
      const released = await interruptions.releaseAll(graceMs)
      for (const timer of timers) clearInterval(timer)
      await reporter.settled(2000)
      await Promise.allSettled(cleanups.map(cleanup => cleanup()))
      log.info('worker stopped', { worker: options.workerId, released })
    },

    get running() {
      return dispatcher.active.size
    },
  }
}
