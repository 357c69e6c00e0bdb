import type { BoundStatement, DeferrableQuery } from './types'

/**
 * A transaction whose driver sends statements with its COMMIT (postgres.js with pipelining): the
 * queries deferred with writeAtCommit() travel in the same socket write as COMMIT.
 */
export interface CommitPipeline {
  atCommit: DeferrableQuery[]
  /** Sends a statement on the transaction's connection as the driver sends its own (queryPrepared on `tx`): no query builder in between. */
  run(statement: BoundStatement): Promise<Array<Record<string, unknown>>>
}

// Handed from the driver's BEGIN to transaction(), which takes it synchronously: drizzle calls
// transaction()'s callback within the driver's begin call, before anything is awaited.
let beingOpened: CommitPipeline | undefined

/** Runs `open` (which calls back into transaction()) with `pipeline` to be taken. */
export function openingWith<T>(pipeline: CommitPipeline, open: () => T): T {
  beingOpened = pipeline
  try {
    return open()
  }
  finally {
    beingOpened = undefined
  }
}

/** The pipeline of the transaction being opened right now, if its driver has one; taken once. */
export function takeOpeningPipeline(): CommitPipeline | undefined {
  const pipeline = beingOpened
  beingOpened = undefined
  return pipeline
}
