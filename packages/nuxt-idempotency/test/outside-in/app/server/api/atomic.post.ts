import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'drizzle-orm'

/**
 * Atomic mode: the handler's write (a row in outside_in_writes) commits in `tx`, the transaction
 * that stores the answer, or not at all. Headers, so that a retry's body is the same:
 * X-Fail-After-Write throws after the write (a 500 rolls both back); X-Hold-Ms keeps the
 * transaction open after the write (to be cut by a fault).
 */
export default defineIdempotentEventHandler({
  mode: 'atomic',
  // A request cut with its database (its claim not released) holds the key this long, not the default 30 s.
  lease: 2000,
  async handler(event, { idempotencyKey, tx }) {
    const body = await readBody<{ note?: string }>(event)
    recordExecution('atomic', idempotencyKey, body)
    await tx.execute(sql`insert into outside_in_writes (key, note) values (${idempotencyKey}, ${body?.note ?? ''})`)
    await sleep(Number(getHeader(event, 'x-hold-ms') ?? 0))
    if (getHeader(event, 'x-fail-after-write')) throw createError({ statusCode: 500, statusMessage: 'Failed after its write' })
    return { key: idempotencyKey, written: true }
  },
})
