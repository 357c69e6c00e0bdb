import { z } from 'zod'
import { idempotencyStatuses, jobStatuses } from '../../shared/statuses'
import { listQuery } from '../ops/list'

/**
 * Inputs that their routes declare inside the route file or keep private to a service, where no
 * other module can import them: written here as the routes declare them, for the description only.
 * The e2e test (tests/e2e/openapi.test.ts) checks them against the served routes; each should move
 * next to its route's other schemas and be imported here instead (see the report of this change).
 */

/** server/tenants/service.ts (TenantIdSchema, ApiKeyIdSchema): anything else in the path is 404. */
export const TenantIdParam = z.string().regex(/^ten_[\w-]{1,64}$/).meta({ description: 'A tenant id, `ten_…`.', example: 'ten_0f3a9c' })
export const ApiKeyIdParam = z.string().regex(/^key_[\w-]{1,64}$/).meta({ description: 'An API key id, `key_…`.', example: 'key_5d1e7b' })

/** server/api/ops/tenants.post.ts */
export const CreateTenantBody = z.object({ name: z.string().trim().min(1).max(100) }).meta({ id: 'CreateTenantRequest', example: { name: 'acme' } })
/** server/api/ops/tenants/[id]/keys.post.ts: no body, or an empty object. */
export const IssueKeyBody = z.object({}).strict().meta({ id: 'IssueApiKeyRequest' })
/** server/api/ops/jobs/[id]/dismiss.post.ts */
export const DismissJobBody = z.object({ reason: z.string().trim().min(1).max(500) }).meta({ id: 'DismissJobRequest', example: { reason: 'The order was deleted; nothing left to confirm.' } })

/** server/api/ops/audit/duplicates.get.ts */
export const AuditQuery = z.object({
  windowMinutes: z.coerce.number().int().min(1).max(1440).default(10),
  replayThreshold: z.coerce.number().int().min(1).max(1_000_000).default(20),
}).strict()

const evidenceText = (max: number) => z.string().min(1).max(max).optional()
/** server/api/ops/evidence.get.ts: exactly one of key, orderId, eventId, requestId, keyId (`scope` narrows `key`). */
export const EvidenceQuery = z.object({
  key: evidenceText(255),
  scope: evidenceText(300),
  orderId: evidenceText(200),
  eventId: evidenceText(255),
  requestId: evidenceText(128),
  keyId: evidenceText(200),
}).strict()

/** server/api/ops/idempotency.get.ts */
export const RecordsQuery = listQuery({
  tenant: z.string().min(1).max(200).optional(),
  scope: z.string().min(1).max(300).optional(),
  status: z.enum(idempotencyStatuses).optional(),
  key: z.string().min(1).max(255).optional(),
})

/** server/api/ops/jobs.get.ts */
export const JobsQuery = listQuery({
  status: z.enum(jobStatuses).optional(),
  kind: z.string().min(1).max(100).optional(),
  resourceId: z.string().min(1).max(200).optional(),
})

/** server/api/ops/mailbox.get.ts */
export const MailboxQuery = listQuery({ orderId: z.string().min(1).max(200).optional() })

/** server/api/ops/tasks/[name].post.ts */
export const runnableTasks = ['jobs:rescue', 'retention:cleanup', 'payments:reconcile'] as const
