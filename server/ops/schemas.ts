import { z } from 'zod'
import { eventTypes, idempotencyStatuses, jobStatuses, ledgerDiscrepancyStatuses } from '../../shared/statuses'
import { SkuSchema } from '../stock/schema'
import { listQuery } from './list'

/** What the ops routes validate: their bodies, queries and path names. */

/** An optional query filter: 1 to `max` characters. */
const text = (max: number) => z.string().min(1).max(max).optional()

/** POST /api/ops/jobs/{id}/dismiss. */
export const DismissSchema = z.object({ reason: z.string().trim().min(1).max(500) })

/** GET /api/ops/audit/duplicates. */
export const AuditQuery = z.object({
  windowMinutes: z.coerce.number().int().min(1).max(1440).default(10),
  replayThreshold: z.coerce.number().int().min(1).max(1_000_000).default(20),
}).strict()

/** GET /api/ops/evidence: one subject at least (server/ops/evidence.ts, requireOneSubject). */
export const EvidenceQuery = z.object({
  key: text(255),
  scope: text(300),
  orderId: text(200),
  eventId: text(255),
  requestId: text(128),
  keyId: text(200),
}).strict()

/** GET /api/ops/idempotency. */
export const RecordsQuery = listQuery({
  tenant: text(200),
  scope: text(300),
  status: z.enum(idempotencyStatuses).optional(),
  key: text(255),
})

/** GET /api/ops/jobs. */
export const JobsQuery = listQuery({
  status: z.enum(jobStatuses).optional(),
  kind: text(100),
  resourceId: text(200),
})

/** GET /api/ops/mailbox. */
export const MailboxQuery = listQuery({ orderId: text(200) })

/** GET /api/ops/ledger/discrepancies. */
export const DiscrepanciesQuery = listQuery({
  status: z.enum(ledgerDiscrepancyStatuses).optional(),
  orderId: text(200),
})

/** GET /api/ops/inventory: at most 100 rows, so no limit to choose. */
export const InventoryQuery = z.object({
  tenantId: text(200),
  sku: SkuSchema.optional(),
}).strict()

/** GET /api/ops/inventory/{tenantId}/{sku}: a path that cannot name a tracked SKU is 404, like one that names none. */
export const InventoryPath = z.object({
  tenantId: z.string().min(1).max(200),
  sku: SkuSchema,
})

/** GET /api/ops/events. */
export const EventsQuery = listQuery({
  tenant: text(200),
  type: z.enum(eventTypes).optional(),
  orderId: text(200),
})

/** POST /api/ops/events/{id}/resend: one endpoint, or (no body, `{}`) every enabled endpoint subscribed to the event's type. */
export const ResendSchema = z.object({ endpointId: z.string().min(1).max(64).optional() }).strict()

/** GET /api/ops/webhook-endpoints. */
export const WebhookEndpointsQuery = listQuery({ tenant: text(200) })

/** POST /api/ops/ledger/discrepancies/{id}/resolve: what was done about it, and who did it. */
export const ResolveDiscrepancySchema = z.object({
  note: z.string().trim().min(1).max(1000),
  operator: z.string().trim().min(1).max(100),
})

/**
 * The maintenance services POST /api/ops/tasks/{name} runs now (they also run on their schedule,
 * docs/operations.md#maintenance); `retention:cleanup` runs the three retention services in turn.
 */
export const runnableTasks = [
  'jobs:rescue', 'orders:expire', 'retention:records', 'retention:jobs', 'retention:request-log', 'retention:cleanup', 'payments:reconcile', 'payments:ledger-check',
] as const
export type TaskName = typeof runnableTasks[number]
/** Any other name is 404. */
export const TaskNameSchema = z.enum(runnableTasks)
