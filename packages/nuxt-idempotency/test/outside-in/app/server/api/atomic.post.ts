import { sql } from 'drizzle-orm'

/**
 * Atomic mode: the handler's write (a row in outside_in_writes) commits in `tx`, the transaction
 * that stores the answer, or not at all. `fail` throws after the write: a 500 rolls both back.
 */
export default defineIdempotentEventHandler({
  mode: 'atomic',
  async handler(event, { idempotencyKey, tx }) {
    const body = await readBody<{ note?: string, fail?: boolean }>(event)
    recordExecution('atomic', idempotencyKey, body)
    await tx.execute(sql`insert into outside_in_writes (key, note) values (${idempotencyKey}, ${body?.note ?? ''})`)
    if (body?.fail) throw createError({ statusCode: 500, statusMessage: 'Failed after its write' })
    return { key: idempotencyKey, written: true }
  },
})
