/**
 * The status vocabularies of the stored rows, shared by the server (drizzle schema, check
 * constraints, zod filters) and the app (ops console filters and badges). One list per table.
 */

// The idempotency layer's own (nuxt-idempotency owns that table).
export { idempotencyStatuses, type IdempotencyStatus } from 'nuxt-idempotency/statuses'

/**
 * queued: waiting for run_at. running: claimed by `locked_by` under `fence`. failed: an attempt
 * failed and the job waits for its retry at run_at. completed. dead_letter: out of attempts or a
 * permanent error; an operator may redrive it, or dismiss it with a reason when it can never
 * succeed. dismissed: final, never claimed, rescued or redriven again.
 */
export const jobStatuses = ['queued', 'running', 'failed', 'completed', 'dead_letter', 'dismissed'] as const
export type JobStatus = typeof jobStatuses[number]

/** received: stored, its webhook.apply job pending. applied: it moved the order. ignored: it could not (see history). */
export const webhookEventStatuses = ['received', 'applied', 'ignored'] as const
export type WebhookEventStatus = typeof webhookEventStatuses[number]
export const webhookEventSources = ['webhook', 'reconciliation'] as const
export type WebhookEventSource = typeof webhookEventSources[number]
