import { z } from 'zod'
import { idempotencyStatuses, jobStatuses } from '../../shared/statuses'
import { listQuery } from '../ops/list'

/**
 * Inputs their routes declare inside the route file, or keep private to a service, where no other
 * module can import them. Each declaration below is the route's own, verbatim: `routeInputSources`
 * names where it lives, and tests/unit/openapi.test.ts fails when the two differ. Each should move
 * next to its route's other schemas and be imported here instead.
 */

const TenantIdSchema = z.string().regex(/^ten_[\w-]{1,64}$/)
const ApiKeyIdSchema = z.string().regex(/^key_[\w-]{1,64}$/)
const CreateTenantSchema = z.object({ name: z.string().trim().min(1).max(100) })
const IssueKeySchema = z.object({}).strict()
const DismissSchema = z.object({ reason: z.string().trim().min(1).max(500) })

const AuditQuery = z.object({
  windowMinutes: z.coerce.number().int().min(1).max(1440).default(10),
  replayThreshold: z.coerce.number().int().min(1).max(1_000_000).default(20),
}).strict()

const text = (max: number) => z.string().min(1).max(max).optional()

const EvidenceQuery = z.object({
  key: text(255),
  scope: text(300),
  orderId: text(200),
  eventId: text(255),
  requestId: text(128),
  keyId: text(200),
}).strict()

const RecordsQuery = listQuery({
  tenant: z.string().min(1).max(200).optional(),
  scope: z.string().min(1).max(300).optional(),
  status: z.enum(idempotencyStatuses).optional(),
  key: z.string().min(1).max(255).optional(),
})

const JobsQuery = listQuery({
  status: z.enum(jobStatuses).optional(),
  kind: z.string().min(1).max(100).optional(),
  resourceId: z.string().min(1).max(200).optional(),
})

const MailboxQuery = listQuery({ orderId: z.string().min(1).max(200).optional() })

const runnable = ['jobs:rescue', 'retention:cleanup', 'payments:reconcile']

/** Where each declaration above is the route's own. */
export const routeInputSources: Record<string, string[]> = {
  'server/tenants/service.ts': ['TenantIdSchema', 'ApiKeyIdSchema'],
  'server/api/ops/tenants.post.ts': ['CreateTenantSchema'],
  'server/api/ops/tenants/[id]/keys.post.ts': ['IssueKeySchema'],
  'server/api/ops/jobs/[id]/dismiss.post.ts': ['DismissSchema'],
  'server/api/ops/audit/duplicates.get.ts': ['AuditQuery'],
  'server/api/ops/evidence.get.ts': ['text', 'EvidenceQuery'],
  'server/api/ops/idempotency.get.ts': ['RecordsQuery'],
  'server/api/ops/jobs.get.ts': ['JobsQuery'],
  'server/api/ops/mailbox.get.ts': ['MailboxQuery'],
  'server/api/ops/tasks/[name].post.ts': ['runnable'],
}

export const TenantIdParam = TenantIdSchema.meta({ description: 'A tenant id, `ten_…`; any other value is 404.', example: 'ten_0f3a9c' })
export const ApiKeyIdParam = ApiKeyIdSchema.meta({ description: 'An API key id, `key_…`; any other value is 404.', example: 'key_5d1e7b' })
export const CreateTenantBody = CreateTenantSchema.meta({ id: 'CreateTenantRequest', example: { name: 'acme' } })
export const IssueKeyBody = IssueKeySchema.meta({ id: 'IssueApiKeyRequest', description: 'No body, or an empty object.' })
export const DismissJobBody = DismissSchema.meta({ id: 'DismissJobRequest', example: { reason: 'The order was deleted; nothing left to confirm.' } })
export { AuditQuery, EvidenceQuery, JobsQuery, MailboxQuery, RecordsQuery }
/** Any other name is 404. */
export const TaskNameParam = z.enum(runnable as [string, ...string[]])
