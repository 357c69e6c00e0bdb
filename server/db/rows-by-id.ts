import { getTableColumns, sql } from 'drizzle-orm'
import type { AnyPgColumn, PgTable } from 'drizzle-orm/pg-core'
import { type Database, defineStatement, mapRow, queryPrepared } from '@idempotent-checkout/db-kit'

/**
 * A batch loader: the rows of `table` whose `id` is one of the batch's, in one prepared query
 * (the ids as one text parameter, so one statement text for any batch size). An entry per id asked
 * for, in order; undefined where no row has it.
 */
export function rowsById<Table extends PgTable>(table: Table, id: AnyPgColumn) {
  const columns = getTableColumns(table)
  const select = defineStatement<{ ids: string }>(db => db.select().from(table as PgTable)
    .where(sql`${id} = any(string_to_array(${sql.placeholder('ids')}, ','))`))
  return async (db: Database, ids: string[]): Promise<Array<Table['$inferSelect'] | undefined>> => {
    const rows = await queryPrepared(db, select(db, { ids: ids.join(',') }))
    const byId = new Map(rows.map(row => [row[id.name] as string, mapRow(columns, row) as Table['$inferSelect']]))
    return ids.map(value => byId.get(value))
  }
}
