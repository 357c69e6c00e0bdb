import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { listMailbox } from '../../ops/records'
import type { OpsList, OpsMailboxMessage } from '../../../shared/ops-api'

const MailboxQuery = z.object({
  orderId: z.string().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
}).strict()

export default defineEventHandler(async (event) => {
  requireOps(event)
  const filter = readValidatedQuery(event, MailboxQuery)
  return { object: 'list', data: await listMailbox(useDatabaseHandle().db, filter) } satisfies OpsList<OpsMailboxMessage<Date>>
})
