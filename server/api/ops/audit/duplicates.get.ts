import { z } from 'zod'
import { useConfig } from '../../../config'
import { useDatabaseHandle } from '../../../db'
import { readValidatedQuery } from '../../../http/body'
import { auditDuplicates } from '../../../ops/audit'
import type { DuplicatesAudit } from '../../../../shared/ops-api'

const AuditQuery = z.object({
  windowMinutes: z.coerce.number().int().min(1).max(1440).default(10),
  replayThreshold: z.coerce.number().int().min(1).max(1_000_000).default(20),
}).strict()

export default defineEventHandler(async (event) => {
  const { windowMinutes, replayThreshold } = readValidatedQuery(event, AuditQuery)
  return (await auditDuplicates(useDatabaseHandle().db, { windowMinutes, replayThreshold, keyTtlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS })) satisfies DuplicatesAudit
})
