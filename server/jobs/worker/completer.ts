import type { ClaimedJob, JobEffect, JobStore } from '../store'

/** Completions sent in one transaction at most; more wait for the next. */
export const MAX_COMPLETION_BATCH = 100

export type CompletionStore = Pick<JobStore, 'completeWith' | 'completeAll'>

interface PendingCompletion {
  job: ClaimedJob
  effect?: JobEffect
  resolve: (completed: boolean) => void
  reject: (error: unknown) => void
}

/**
 * Completions go out in batches, one transaction each: those that arrive while a batch is in
 * flight leave together when it returns. A batch that fails is retried one by one, so only the
 * failing job fails; a job whose fence was lost writes nothing in either.
 */
export function createCompleter(store: CompletionStore) {
  const completionQueue: PendingCompletion[] = []
  let flushing = false

  async function flushCompletions(): Promise<void> {
    while (completionQueue.length > 0) {
      const batch = completionQueue.splice(0, MAX_COMPLETION_BATCH)
      if (batch.length === 1) {
        const [only] = batch as [PendingCompletion]
        await store.completeWith(only.job, only.effect).then(only.resolve, only.reject)
        continue
      }
      try {
        const completed = await store.completeAll(batch)
        batch.forEach((entry, index) => entry.resolve(completed[index]!))
      }
      catch {
        await Promise.all(batch.map(entry => store.completeWith(entry.job, entry.effect).then(entry.resolve, entry.reject)))
      }
    }
  }

  return {
    /** True once completed with its effect; false (nothing written) when the claim is not current. */
    complete(job: ClaimedJob, effect: JobEffect | undefined): Promise<boolean> {
      return new Promise((resolve, reject) => {
        completionQueue.push({ job, effect, resolve, reject })
        if (flushing) return
        flushing = true
        // Completions of the same tick join the first batch.
        queueMicrotask(() => {
          flushCompletions().finally(() => { flushing = false })
        })
      })
    },
  }
}
