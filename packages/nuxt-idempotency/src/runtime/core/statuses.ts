/**
 * An idempotency record's states. processing: claimed, result not stored. succeeded/failed: the
 * response is stored and replayed; failed marks a deterministic failure (4xx). No imports: pages
 * may list them too.
 */
export const idempotencyStatuses = ['processing', 'succeeded', 'failed'] as const
export type IdempotencyStatus = typeof idempotencyStatuses[number]
