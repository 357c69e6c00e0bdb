import { z } from 'zod'
import type { Database } from '@idempotent-checkout/db-kit'
import { resourceLockKey } from '../../../shared/resources'
import { describeError, PermanentJobError, RetryableJobError } from '../errors'
import { injectJobFailure, readJobFaults } from '../faults'
import type { JobKind } from '../kind'
import type { ClaimedJob } from '../store'
import type { LockingJob } from './resource-locks'

/** A claimed job, ready to run: payload parsed, batch data loaded, resource lock taken (or found busy). */
export interface PreparedJob extends LockingJob {
  job: ClaimedJob
  kind: JobKind
  payload?: unknown
  loaded?: unknown
  /** Thrown when the job runs: its payload did not parse, its batch's read failed, or its lock could not be asked for. */
  failure?: unknown
}

export interface PrepareOptions {
  db: Database
  kinds: ReadonlyMap<string, JobKind>
  faultsEnabled: boolean
  lockAll: (entries: PreparedJob[]) => Promise<void>
}

function parse(job: ClaimedJob, options: PrepareOptions): PreparedJob {
  // Claimed by kind: this worker runs every kind it claims.
  const kind = options.kinds.get(job.kind)!
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
}

/** Runs each loader once for the batch; a failed read fails that loader's jobs, retryably. */
async function loadBatch(db: Database, prepared: PreparedJob[]): Promise<void> {
  const byLoader = new Map<NonNullable<JobKind['load']>, PreparedJob[]>()
  for (const entry of prepared) {
    if (!entry.kind.load || entry.failure) continue
    byLoader.set(entry.kind.load, [...byLoader.get(entry.kind.load) ?? [], entry])
  }
  await Promise.all([...byLoader].map(async ([load, entries]) => {
    try {
      const loaded = await load(db, entries.map(entry => entry.payload))
      entries.forEach((entry, index) => { entry.loaded = loaded[index] })
    }
    catch (error) {
      for (const entry of entries) entry.failure = new RetryableJobError(`reading the job's data failed: ${describeError(error)}`, { cause: error })
    }
  }))
}

/** Parses the payloads, runs each loader once for the batch, and takes the distinct resource locks together. */
export async function prepareBatch(claimed: ClaimedJob[], options: PrepareOptions): Promise<PreparedJob[]> {
  const prepared = claimed.map(job => parse(job, options))
  await Promise.all([loadBatch(options.db, prepared), options.lockAll(prepared)])
  return prepared
}
