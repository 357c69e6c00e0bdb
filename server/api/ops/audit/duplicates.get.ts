import { useConfig } from '../../../config'
import { useDatabaseHandle } from '../../../db'
import { readValidatedQuery } from '../../../http/body'
import { auditDuplicates } from '../../../ops/audit'
import { AuditQuery } from '../../../ops/schemas'
import type { DuplicatesAudit } from '../../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const { windowMinutes, replayThreshold } = readValidatedQuery(event, AuditQuery)
  return (await auditDuplicates(useDatabaseHandle().db, { windowMinutes, replayThreshold, keyTtlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS })) satisfies DuplicatesAudit
})
