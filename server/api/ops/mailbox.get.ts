import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { listQuery, opsList } from '../../ops/list'
import { listMailbox } from '../../ops/records'
import type { OpsList, OpsMailboxMessage } from '../../../shared/ops-api'

const MailboxQuery = listQuery({ orderId: z.string().min(1).max(200).optional() })

export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, MailboxQuery)
  return opsList(await listMailbox(useDatabaseHandle().db, filter)) satisfies OpsList<OpsMailboxMessage<Date>>
})
