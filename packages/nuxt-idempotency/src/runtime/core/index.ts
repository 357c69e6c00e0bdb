// nuxt-idempotency/core: the idempotency lifecycle without h3 or Nitro, for a worker, a queue
// consumer or another server, and the parts an app that opens its own services hands the module.
// Each name is documented in README.md#nuxt-idempotencycore; test/exports.test.ts pins the list.
export {
  type AtomicOperation, type AtomicPlan, type IdempotencyDeps, type IdempotentOperation, type IdempotentOutcome, type IdempotentRequest, type IdempotentResult,
  type LeasedOperation, runIdempotent, type StoredFailure, type TransactionalOperation,
} from './run'
export { createIdempotencyStore, type IdempotencyStore } from './store'
export { createReplayCache, type ReplayCache, type ReplayCacheOptions } from './replay-cache'
export { createResponseCipher, type ResponseCipher } from './encryption'
export { checkIdempotencyKey, type KeyCheck, parseIdempotencyKeyHeader } from './key'
export { fingerprint, type FingerprintInput } from './fingerprint'
export { IDEMPOTENCY_MIGRATIONS_TABLE, idempotencyMigrations } from './migrations'
export { idempotencyProblem, idempotencyProblems, type IdempotencyProblemSlug, type ProblemBody, problemError, problemOf } from './problems'
export { idempotencyRecords } from './schema'
export { type IdempotencyStatus, idempotencyStatuses } from './statuses'
export { createMemoryLocks, createRedisLocks, LockBackendError, type Locks, type RedisClient, type RedisLocksOptions } from '../locks'
export {
  checkTimestamp, hmacSha256, midtransNotificationId, midtransNotificationIdentity, midtransSignature, sameBytes, signStandardWebhook, STANDARD_SIGNATURE_HEADERS,
  standardWebhookHeader, TIMESTAMP_TOLERANCE_SECONDS, type Verification, verifyMidtransSignature, verifyStandardWebhook, verifyStripeSignature, type WebhookDelivery,
} from '../webhooks'
