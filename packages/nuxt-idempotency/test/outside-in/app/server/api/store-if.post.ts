import { randomUUID } from 'node:crypto'

/** A 202 "still pending" answer is sent but not remembered: the retry asks again. Anything else is stored. */
export default defineIdempotentEventHandler({
  storeIf: response => response.status !== 202,
  async handler(event, { idempotencyKey }) {
    const body = await readBody<{ pending?: boolean }>(event)
    recordExecution('store-if', idempotencyKey, body)
    setResponseStatus(event, body?.pending ? 202 : 201)
    return { state: body?.pending ? 'pending' : 'done', run: randomUUID() }
  },
})
