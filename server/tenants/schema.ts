import { z } from 'zod'

/** A tenant id (`ten_…`), as the tenant and key routes take it from their path. */
export const TenantIdSchema = z.string().regex(/^ten_[\w-]{1,64}$/)
/** An API key id (`key_…`), as the key routes take it from their path. */
export const ApiKeyIdSchema = z.string().regex(/^key_[\w-]{1,64}$/)

/** POST /api/ops/tenants. */
export const CreateTenantSchema = z.object({ name: z.string().trim().min(1).max(100) })

/** POST /api/ops/tenants/{id}/keys: nothing to choose about a new key, so no body or an empty object. */
export const IssueKeySchema = z.object({}).strict()
