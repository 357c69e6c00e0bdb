import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { opsList } from '../../ops/list'
import { listMailbox } from '../../ops/records'
import { MailboxQuery } from '../../ops/schemas'
import type { OpsList, OpsMailboxMessage } from '../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, MailboxQuery)
  return opsList(await listMailbox(useDatabaseHandle().db, filter)) satisfies OpsList<OpsMailboxMessage<Date>>
})
