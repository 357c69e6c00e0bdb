import { randomUUID } from 'node:crypto'

/**
 * Creates a subscription, as an app that installed the module would: the key contract's basics
 * (one execution per key, replays, 422 for another body, 400 without a key) and encryption at rest.
 */
export default defineIdempotentEventHandler(async (event, ctx) => {
  const body = await readBody<{ plan?: unknown, note?: unknown }>(event)
  recordExecution('subscriptions', ctx.idempotencyKey, body)
  await handlerDelay()
  const id = `sub_${randomUUID()}`
  setResponseStatus(event, 201)
  setResponseHeader(event, 'Location', `/api/subscriptions/${id}`)
  return { id, plan: body?.plan, ...(body?.note !== undefined && { note: body.note }) }
})
