import type { ClaimedJob } from '../../../server/jobs/store'

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
