import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { collectEvidence, requireOneSubject } from '../../ops/evidence'
import type { Evidence } from '../../../shared/ops-api'

const text = (max: number) => z.string().min(1).max(max).optional()

const EvidenceQuery = z.object({
  key: text(255),
  scope: text(300),
  orderId: text(200),
  eventId: text(255),
  requestId: text(128),
  keyId: text(200),
}).strict()

export default defineEventHandler(async (event) => {
  const query = readValidatedQuery(event, EvidenceQuery)
  requireOneSubject(query)
  return (await collectEvidence(useDatabaseHandle().db, query)) satisfies Evidence
})
