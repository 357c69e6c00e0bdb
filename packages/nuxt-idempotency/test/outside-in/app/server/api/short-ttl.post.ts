import { randomUUID } from 'node:crypto'

/** Keys remembered for one second only: a retry after it is a new request. */
export default defineIdempotentEventHandler({
  ttl: 1,
  async handler(event, { idempotencyKey }) {
    const body = await readBody(event)
    recordExecution('short-ttl', idempotencyKey, body)
    return { run: randomUUID() }
  },
})
