import { sql } from 'drizzle-orm'

/** For the test: a key's committed writes and its stored records, each record whole as text. */
export default defineEventHandler(async (event) => {
  const key = String(getQuery(event).key ?? '')
  const { db } = await useIdempotencyDatabase()
  const rowsOf = (result: unknown) => (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Array<Record<string, unknown>>
  const writes = rowsOf(await db.execute(sql`select count(*)::int as n from outside_in_writes where key = ${key}`))
  const records = rowsOf(await db.execute(sql`select to_jsonb(r)::text as row from idempotency_records r where key = ${key}`))
  return { writes: Number(writes[0]!.n), records: records.map(record => String(record.row)) }
})
