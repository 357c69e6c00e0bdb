import { isDeepStrictEqual } from 'node:util'
import { z } from 'zod'
import { defineJobKind } from '../../../server/jobs/kind'
import type { ClaimedJob } from '../../../server/jobs/store'
import type { Execution } from '../../../server/jobs/worker/executor'
import type { PreparedJob } from '../../../server/jobs/worker/prepare'
import type { Outcome, Reporter } from '../../../server/jobs/worker/report'
import { registry } from '../../../server/observability/metrics'

const at = new Date('2026-01-01T00:00:00Z')

/** A claimed job as the store answers one: attempt 1 under fence 1 unless told otherwise. */
export function claimedJob(overrides: Partial<ClaimedJob> = {}): ClaimedJob {
  return {
    id: 'job_1',
    kind: 'test.kind',
    dedupeKey: 'key_1',
    payload: {},
    status: 'running',
    attempt: 1,
    maxAttempts: 8,
    snoozes: 0,
    runAt: at,
    lastError: null,
    errors: [],
    resourceId: null,
    idempotencyKey: null,
    requestId: null,
    lockedBy: 'worker-1',
    fence: 1,
    faults: null,
    startedAt: at,
    heartbeatAt: at,
    completedAt: null,
    dismissedReason: null,
    dismissedAt: null,
    createdAt: at,
    updatedAt: at,
    queueWaitMs: 0,
    ...overrides,
  }
}

export interface Deferred<T> {
  promise: Promise<T>
  resolve: (value: T) => void
  reject: (error: unknown) => void
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((done, fail) => {
    resolve = done
    reject = fail
  })
  return { promise, resolve, reject }
}

/** A kind for pieces that never run a handler. */
export const idleKind = defineJobKind({ kind: 'test.kind', payload: z.object({}), run: async () => {} })

/** A prepared job of `idleKind`, claimed as `id`, ready to run. */
export const preparedJob = (id: string, overrides: Partial<PreparedJob> = {}): PreparedJob =>
  ({ job: claimedJob({ id }), kind: idleKind, payload: {}, ...overrides })

/** An execution of `prepared` as the dispatcher starts one; `done` settles when it has finished. */
export const runningJob = (prepared: PreparedJob, done: Promise<void> = Promise.resolve()): Execution =>
  ({ prepared, controller: new AbortController(), paused: false, committing: false, done })

/** A reporter that records its reports, with the work handed to it awaited by `settled`. */
export function recordingReporter() {
  const reports: Array<{ jobId: string, result: Outcome, started: number, release: Promise<string> | undefined }> = []
  const pending: Array<Promise<void>> = []
  const reporter: Reporter = {
    report: (job, result, started, release) => { reports.push({ jobId: job.id, result, started, release }) },
    untilStopped: (work) => { pending.push(work) },
    settled: async () => { await Promise.allSettled(pending) },
  }
  return { reporter, reports }
}

/** One sample of a metric in the app's registry (a histogram's by its full name, `…_sum`); undefined when none has those labels. */
export async function metricSample(name: string, labels: Record<string, string>, sample = name): Promise<number | undefined> {
  // A histogram's samples carry their full name; a counter's do not.
  const { values }: { values: Array<{ value: number, labels: object, metricName?: string }> } = await registry.getSingleMetric(name)!.get()
  return values.find(value => (value.metricName ?? name) === sample && isDeepStrictEqual(value.labels, labels))?.value
}
