import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { readValidatedJson } from '../../http/body'
import { createTenant } from '../../tenants/service'
import type { OpsCreatedTenant } from '../../../shared/ops-api'

const CreateTenantSchema = z.object({ name: z.string().trim().min(1).max(100) })

export default defineEventHandler(async (event) => {
  const { name } = await readValidatedJson(event, CreateTenantSchema)
  const created = await createTenant(useDatabaseHandle().db, name, { requestId: event.context.requestId })
  setResponseStatus(event, 201)
  setResponseHeader(event, 'Cache-Control', 'no-store')
  return created satisfies OpsCreatedTenant
})
