import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { collectEvidence, requireOneSubject } from '../../ops/evidence'
import { EvidenceQuery } from '../../ops/schemas'
import type { Evidence } from '../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const query = readValidatedQuery(event, EvidenceQuery)
  requireOneSubject(query)
  return (await collectEvidence(useDatabaseHandle().db, query)) satisfies Evidence
})
