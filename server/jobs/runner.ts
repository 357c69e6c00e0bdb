import { setTimeout as sleep } from 'node:timers/promises'
import { z } from 'zod'
import type { Database, DatabaseHandle } from 'nuxt-idempotency/db'
import type { Locks } from 'nuxt-idempotency/locks'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import type { BackoffPolicy } from './backoff'
import { describeError, FencedOutError, JobInterrupted, PermanentJobError, RetryableJobError } from './errors'
import { injectJobFailure, readJobFaults } from './faults'
import type { JobContext, JobKind } from './kind'
import { type ClaimedJob, createJobStore } from './store'
import { JOBS_CHANNEL, onLocalWake } from './wake'
import { createCompleter } from './worker/completer'
import { createLockKeeper, type HeldLock } from './worker/resource-locks'
import { nextStep } from './worker/retry-policy'
import { resourceLockKey } from '../../shared/resources'

export interface WorkerOptions {
  db: Database
  notifications?: DatabaseHandle['notifications']
  locks: Locks
  kinds: JobKind[]
  workerId: string
  concurrency: number
  /** Claimed beyond the free slots and held in a local buffer, so a finished slot refills without a round trip. */
  prefetch: number
  pollIntervalMs: number
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

/** A claimed job, ready to run: payload parsed, batch data loaded, resource lock taken (or found busy). */
interface PreparedJob {
  job: ClaimedJob
  kind: JobKind
  payload?: unknown
  loaded?: unknown
  /** Thrown when the job runs: its payload did not parse, or its batch's read failed. */
  failure?: unknown
  lockKey?: string
  lock?: HeldLock
  lockBusy?: boolean
}

interface Execution {
  prepared: PreparedJob
  controller: AbortController
  /** The stall fault: heartbeat and lock renewal skip this job, as in a GC pause. */
  paused: boolean
  /** Its handler is done and its completion waits in (or for) a batch: its slot is free for the next job. */
  committing: boolean
  done: Promise<void>
}

/**
 * After a claim that found the queue drained, a wake-up (a new order, a NOTIFY) claims no sooner
 * than this after it: under a stream of orders, one claim takes the jobs of several instead of one each.
 */
const CLAIM_COALESCE_MS = 5

interface Outcome {
  transition: string
  extra: Record<string, unknown>
  level: 'info' | 'warn'
}

const outcome = (transition: string, extra: Record<string, unknown> = {}, level: Outcome['level'] = 'info'): Outcome => ({ transition, extra, level })

/**
 * The job runner. Claims due jobs in batches (one statement, FOR UPDATE SKIP LOCKED, each claim
 * under a fresh fence token) up to its concurrency plus a small prefetch buffer; reads what a
 * batch needs in one query per loader; takes the batch's resource locks in one pipelined write;
 * heart-beats all its claims in one statement and renews all its locks on one timer; and records
 * each outcome conditional on the fence — a completion and its effect in one statement where the
 * kind allows. Wakes on NOTIFY (postgres.js) or in-process signals, and polls as a fallback.
 */
export function createWorker(options: WorkerOptions): Worker {
  const store = createJobStore(options.db)
  const completer = createCompleter(store)
  const lockKeeper = createLockKeeper({
    locks: options.locks,
    lockTtlMs: options.lockTtlMs,
    workerId: options.workerId,
    paused: held => [...active.values()].some(execution => execution.paused && execution.prepared.lock === held),
    lost: held => lockLost(held),
  })
  const kinds = new Map(options.kinds.map(kind => [kind.kind, kind]))
  const kindNames = [...kinds.keys()]
  const capacity = options.concurrency + options.prefetch
  // Refilled when the buffer runs this low, so claims come in batches rather than one per finished job.
  const refillBelow = Math.floor(options.prefetch / 2)
  // Finished handlers whose completions are in flight are bounded too: beyond this the worker stops claiming.
  const maxCommitting = 4 * capacity
  const buffer: PreparedJob[] = []
  const active = new Map<string, Execution>()
  let committing = 0
  let heartbeating = false
  const runningKeys = new Set<string>()
  const pendingReports = new Set<Promise<void>>()
  const cleanups: Array<() => Promise<void> | void> = []
  const timers: NodeJS.Timeout[] = []
  let stopping = false
  let loopDone: Promise<void> = Promise.resolve()
  let wakeUp: (() => void) | undefined
  // A wake-up that arrives while the loop is claiming is kept for its next wait, not lost.
  let wokenWhileBusy = false
  // The last claim found fewer due jobs than it asked for: a freed slot alone is no reason to ask again.
  let queueDrained = false
  let lastClaimAt = 0
  const wake = () => {
    if (wakeUp) wakeUp()
    else wokenWhileBusy = true
  }
  /** New jobs may be due: enqueued here or elsewhere (NOTIFY), or by a job of this worker. */
  const jobsArrived = () => {
    queueDrained = false
    wake()
  }

  /** True when woken, false when the poll interval passed. */
  function waitForWake(ms: number): Promise<boolean> {
    if (wokenWhileBusy) {
      wokenWhileBusy = false
      return Promise.resolve(true)
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(false), ms)
      function done(woken: boolean) {
        clearTimeout(timer)
        wakeUp = undefined
        resolve(woken)
      }
      wakeUp = () => done(true)
    })
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      const wanted = capacity - (active.size - committing) - buffer.length
      let full = false
      if (wanted > 0 && buffer.length <= refillBelow && committing < maxCommitting) {
        let claimed: ClaimedJob[] = []
        lastClaimAt = performance.now()
        try {
          claimed = await store.claim(options.workerId, wanted, kindNames)
        }
        catch (error) {
          log.warn('job claim failed; retrying after the poll interval', { worker: options.workerId, error })
        }
        if (claimed.length > 0) {
          buffer.push(...await prepareBatch(claimed))
          dispatch()
        }
        // A full batch means more may be due: claim again as soon as there is room.
        full = claimed.length === wanted
        queueDrained = !full
      }
      if (full) continue
      const drained = queueDrained
      const woken = await waitForWake(options.pollIntervalMs)
      if (!woken) queueDrained = false
      else if (drained) {
        const sinceClaim = performance.now() - lastClaimAt
        if (sinceClaim < CLAIM_COALESCE_MS) await sleep(CLAIM_COALESCE_MS - sinceClaim)
      }
    }
  }

  /** Parses the payloads, runs each loader once for the batch, and takes the distinct resource locks together. */
  async function prepareBatch(claimed: ClaimedJob[]): Promise<PreparedJob[]> {
    const prepared = claimed.map((job): PreparedJob => {
      // Claimed by kind: this worker runs every kind it claims.
      const kind = kinds.get(job.kind)!
      const payload = kind.payload.safeParse(job.payload)
      if (!payload.success) return { job, kind, failure: new PermanentJobError(`invalid payload: ${z.prettifyError(payload.error)}`) }
      // An injected failure or snooze (test faults) happens before the job touches its resource: no lock for it.
      try {
        injectJobFailure(job, readJobFaults(job, options.faultsEnabled))
      }
      catch (failure) {
        return { job, kind, failure }
      }
      return { job, kind, payload: payload.data, lockKey: kind.resource && resourceLockKey(kind.resource(payload.data)) }
    })
    await Promise.all([loadBatch(prepared), lockKeeper.lockAll(prepared)])
    return prepared
  }

  async function loadBatch(prepared: PreparedJob[]): Promise<void> {
    const byLoader = new Map<NonNullable<JobKind['load']>, PreparedJob[]>()
    for (const entry of prepared) {
      if (!entry.kind.load || entry.failure) continue
      byLoader.set(entry.kind.load, [...byLoader.get(entry.kind.load) ?? [], entry])
    }
    await Promise.all([...byLoader].map(async ([load, entries]) => {
      try {
        const loaded = await load(options.db, entries.map(entry => entry.payload))
        entries.forEach((entry, index) => { entry.loaded = loaded[index] })
      }
      catch (error) {
        for (const entry of entries) entry.failure = new RetryableJobError(`reading the job's data failed: ${describeError(error)}`, { cause: error })
      }
    }))
  }

  /** Starts buffered jobs in claim order while slots are free, one at a time per resource. */
  function dispatch(): void {
    while (!stopping && active.size - committing < options.concurrency) {
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
    execution.done = execute(execution)
      .catch((error) => {
        log.error('job execution crashed', { jobId: job.id, error })
        return undefined
      })
      .then((result) => {
        // The slot is free once the outcome is stored; the lock goes back without being waited for.
        if (execution.committing) committing--
        active.delete(job.id)
        if (lockKey) runningKeys.delete(lockKey)
        const release = lockKeeper.drop(prepared)
        dispatch()
        // Jobs a commit enqueued (webhook.apply enqueues the order's effects) woke this worker through
        // the transaction's after-commit hook already.
        if (!queueDrained) wake()
        if (result) report(prepared, result, started, release)
      })
  }

  async function execute(execution: Execution): Promise<Outcome> {
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
        committing++
        dispatch()
      }
      if (!await write()) throw new FencedOutError(`job ${job.id}: fence ${job.fence} is no longer current; nothing written`)
      committed = true
    }
    const context: JobContext = {
      job,
      signal: controller.signal,
      db: options.db,
      complete: effect => fenced(() => completer.complete(job, effect), true),
      commit: work => fenced(() => store.complete(job, work), false),
    }
    const locked = { lockKey: lock || lockBusy ? execution.prepared.lockKey : undefined, lockResult: lockBusy ? 'busy' : lockResult(lock) }

    try {
      if (failure) throw failure
      if (lockBusy) {
        await store.putBack(job, options.lockBusyDelayMs * (1 + Math.random()))
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
      const settled = await settleFailedAttempt(job, error, interruption, { lockKey: lock?.key, snoozeFault: faults.snoozeMs !== undefined })
      return { ...settled, extra: { ...locked, ...settled.extra } }
    }
  }

  /** One metric set and one log line per attempt; the line waits for the lock's release to carry it. */
  function report(prepared: PreparedJob, result: Outcome, started: number, release?: Promise<string>): void {
    const { job } = prepared
    const seconds = (performance.now() - started) / 1000
    metrics.jobResults.inc({ kind: job.kind, result: result.transition })
    metrics.jobProcessing.observe({ kind: job.kind, result: result.transition }, seconds)
    const write = (lockRelease?: string) => log[result.level]('job attempt finished', {
      jobId: job.id,
      kind: job.kind,
      attempt: job.attempt,
      fence: job.fence,
      worker: options.workerId,
      resourceId: job.resourceId,
      queueWaitMs: job.queueWaitMs,
      ...result.extra,
      lockRelease,
      transition: result.transition,
      durationMs: Math.round(seconds * 1000),
    })
    if (!release) return write()
    untilStopped(release.then(write))
  }

  /** Work that outlives its job's slot (a lock release, a report); stop() waits for it. */
  function untilStopped(work: Promise<void>): void {
    pendingReports.add(work)
    work.finally(() => pendingReports.delete(work))
  }

  /** A claimed job taken out of the buffer before it ran (its claim or lock lost, or shutdown), reported as such. */
  function dropBuffered(entry: PreparedJob, result: Outcome, putBack?: Promise<unknown>): void {
    const index = buffer.indexOf(entry)
    if (index >= 0) buffer.splice(index, 1)
    const started = performance.now()
    untilStopped((putBack ?? Promise.resolve()).catch(() => {}).then(() => report(entry, result, started, lockKeeper.drop(entry))))
  }

  /** Heart-beats every claim this worker holds (running or buffered) in one statement, every third of the timeout. */
  function heartbeatClaims(): void {
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
        if (!current.has(execution.prepared.job.fence)) interrupt(execution, 'fenced_out')
      }
      for (const entry of buffered) {
        if (!current.has(entry.job.fence) && buffer.includes(entry)) dropBuffered(entry, outcome('fenced_out', { error: 'claim superseded while buffered' }, 'warn'))
      }
    }, () => {}).finally(() => { heartbeating = false })
  }

  /** Another worker may hold the resource now: its jobs here step back without spending the attempt. */
  function lockLost(held: HeldLock): void {
    for (const execution of active.values()) {
      if (execution.prepared.lock !== held) continue
      metrics.locksLost.inc({ kind: execution.prepared.job.kind })
      interrupt(execution, 'lock_lost')
    }
    for (const entry of buffer.filter(entry => entry.lock === held)) {
      metrics.locksLost.inc({ kind: entry.job.kind })
      dropBuffered(entry, outcome('lock_lost', { lockKey: held.key, lockResult: 'lost' }, 'warn'), store.putBack(entry.job, options.lockBusyDelayMs))
    }
  }

  function interrupt(execution: Execution, reason: JobInterrupted['reason']): void {
    if (!execution.controller.signal.aborted) execution.controller.abort(new JobInterrupted(reason))
  }

  /** Writes the retry policy's step for an attempt that did not complete. */
  async function settleFailedAttempt(
    job: ClaimedJob,
    error: unknown,
    interruption: JobInterrupted | undefined,
    { lockKey, snoozeFault }: { lockKey?: string, snoozeFault: boolean },
  ): Promise<Outcome> {
    const next = nextStep(job, error, interruption?.reason, options)
    switch (next.step) {
      case 'fenced_out':
        return outcome('fenced_out', { error: next.error }, 'warn')
      case 'released':
        return outcome('released', { reason: 'shutdown' })
      case 'put_back_lock_lost': {
        const putBack = await store.putBack(job, options.lockBusyDelayMs).catch(() => false)
        return outcome(putBack ? 'lock_lost' : 'fenced_out', { lockKey, lockResult: 'lost' }, 'warn')
      }
      case 'snooze':
        await store.putBack(job, next.delayMs, { clearFaults: snoozeFault, snooze: true })
        return outcome('snoozed', { delayMs: next.delayMs, askedMs: next.askedMs, snoozes: job.snoozes + 1, reason: next.reason })
    }
    const { errorClass, message, retryInMs, permanent } = next
    metrics.jobErrors.inc({ kind: job.kind, error_class: errorClass })
    const status = await store.fail(job, { errorClass, message, retryInMs, permanent })
    if (status === 'dead_letter') {
      metrics.jobsDeadLettered.inc({ kind: job.kind })
      return outcome('dead_letter', { errorClass, error: message }, 'warn')
    }
    if (status === 'failed') return outcome('retry', { errorClass, error: message, retryInMs }, 'warn')
    return outcome('fenced_out', { error: message }, 'warn')
  }

  return {
    async start() {
      cleanups.push(onLocalWake(jobsArrived))
      if (options.notifications) {
        try {
          cleanups.push(await options.notifications.listen(JOBS_CHANNEL, jobsArrived))
        }
        catch (error) {
          log.warn('LISTEN failed; the worker polls only', { worker: options.workerId, error })
        }
      }
      timers.push(setInterval(heartbeatClaims, Math.max(10, Math.floor(options.heartbeatTimeoutMs / 3))))
      timers.push(setInterval(lockKeeper.renew, Math.max(10, Math.floor(options.lockTtlMs / 3))))
      loopDone = loop()
      log.info('worker started', { worker: options.workerId, concurrency: options.concurrency, prefetch: options.prefetch, listening: cleanups.length > 1 })
    },

    async stop(graceMs) {
      stopping = true
      wake()
      await loopDone
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
      for (const timer of timers) clearInterval(timer)
      await Promise.race([Promise.allSettled([...pendingReports]), sleep(2000)])
      await Promise.allSettled(cleanups.map(cleanup => cleanup()))
      log.info('worker stopped', { worker: options.workerId, released: unfinished.length + buffered.length })
    },

    get running() {
      return active.size
    },
  }
}

function lockResult(lock: HeldLock | undefined): string | undefined {
  if (!lock) return undefined
  return lock.token ? 'acquired' : 'degraded'
}
