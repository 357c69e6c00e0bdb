import { randomUUID } from 'node:crypto'

/** A retry must repeat the amount and the customer; its timestamp and nonce may differ. */
export default defineIdempotentEventHandler({
  fingerprint: ['amount', 'customer.id'],
  async handler(event, { idempotencyKey }) {
    const body = await readBody(event)
    recordExecution('fingerprint', idempotencyKey, body)
    return { payment: randomUUID() }
  },
})
