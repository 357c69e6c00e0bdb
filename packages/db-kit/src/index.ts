// Postgres (postgres.js, directly or behind a transaction pooler) and PGlite behind one handle:
// migrations under an advisory lock, statements sent prepared or pipelined, transactions with
// after-commit hooks, driver errors read the same way on both, and deletes paced to a duty cycle.
// Each name below is documented in README.md; packages/db-kit/test/exports.test.ts pins the list.
export type { AfterCommitHook, BoundStatement, Database, DatabaseHandle, DeferrableQuery, TransactOptions } from './types'
export {
  IDLE_IN_TRANSACTION_TIMEOUT_MS, LOCK_TIMEOUT_MS, MIGRATION_LOCK_ID, type MigrationSource, openDatabase, type OpenDatabaseOptions, queryAllPrepared, queryPrepared,
} from './client'
export { defineStatement, mapRow, shiftParams } from './statements'
export { afterCommit, transaction, writeAtCommit } from './transaction'
export { dataRefusalCode, describeDatabaseError, isDatabaseUnavailable, isLockTimeout, TransactionPoolerError, violatedConstraint, violatedUniqueConstraint } from './errors'
export { DatabaseUrlError, type PoolMode } from './postgres-options'
export { PGLITE_LOCK_FILE, PgliteDirLockedError } from './pglite-lock'
export {
  type BatchDelete, deleteInPacedBatches, deletePickedRows, type PacedDeleteOptions, type PacedDeleteRun, pickedOnce, RETENTION_LOCK_TTL_MS, RETENTION_PACE,
} from './paced-delete'
