import { randomUUID } from 'node:crypto'
import { appendFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Creates a subscription, as an app that installed the module would. Each execution appends one
 * line (the key and the body) to EXECUTIONS_FILE, outside any transaction, so a test counts how
 * many times the handler really ran. HANDLER_DELAY_MS keeps it in flight for a while, so
 * duplicates sent at once overlap it.
 */
export default defineIdempotentEventHandler(async (event, ctx) => {
  const body = await readBody<{ plan?: unknown }>(event)
  appendFileSync(process.env.EXECUTIONS_FILE!, `${JSON.stringify({ key: ctx.idempotencyKey, body })}\n`)
  await sleep(Number(process.env.HANDLER_DELAY_MS ?? 0))
  const id = `sub_${randomUUID()}`
  setResponseStatus(event, 201)
  setResponseHeader(event, 'Location', `/api/subscriptions/${id}`)
  return { id, plan: body?.plan }
})
