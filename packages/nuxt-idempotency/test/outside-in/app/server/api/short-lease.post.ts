import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * A one-second lease, renewed while the handler runs (X-Hold-Ms long, a header so that a retry's
 * body stays the same): a duplicate is in progress (409) however long it runs; a claim whose
 * instance died is free again a second later.
 */
export default defineIdempotentEventHandler({
  lease: 1000,
  async handler(event, { idempotencyKey }) {
    const body = await readBody(event)
    recordExecution('short-lease', idempotencyKey, body)
    await sleep(Number(getHeader(event, 'x-hold-ms') ?? 0))
    return { run: randomUUID() }
  },
})
