import { type Column, is, Param, Placeholder, type SQL, sql } from 'drizzle-orm'
import type { BoundStatement, Database } from './types'

interface Compilable {
  toSQL(): { sql: string, params: unknown[] }
}

type Fill = (values: Record<string, unknown>) => unknown

/**
 * How each parameter gets its value: a placeholder's value encoded by its column (JSON for json
 * columns), except null, which stays SQL NULL (drizzle's fillPlaceholders would store JSON `null`).
 */
function fillerOf(param: unknown): Fill {
  if (is(param, Placeholder)) return values => values[param.name]
  if (is(param, Param) && is(param.value, Placeholder)) {
    const { encoder, value: { name } } = param
    return values => (values[name] == null ? null : encoder ? encoder.mapToDriverValue(values[name]) : values[name])
  }
  return () => param
}

/**
 * A hot-path statement, written once with drizzle's query builder (values as `sql.placeholder`)
 * and compiled once: each call only fills the values in. The text never changes, so postgres.js
 * sends it as a named prepared statement, parsed and planned once per connection.
 */
export function defineStatement<Values extends Record<string, unknown>>(build: (db: Database) => Compilable) {
  let compiled: { text: string, fills: Fill[] } | undefined
  return (db: Database, values: Values): BoundStatement => {
    // Both drivers speak the same dialect: whichever database compiles it first, the text is the same.
    if (!compiled) {
      const { sql, params } = build(db).toSQL()
      compiled = { text: sql, fills: params.map(fillerOf) }
    }
    return { text: compiled.text, params: compiled.fills.map(fill => fill(values)) }
  }
}

/**
 * A raw row (`DatabaseHandle.query`) in drizzle's shape: each column read by its database name and
 * decoded as drizzle decodes it (timestamps, bigints, JSON), so both drivers give the same values.
 */
export function mapRow<Columns extends Record<string, Column>>(columns: Columns, row: Record<string, unknown>): { [K in keyof Columns]: Columns[K]['_']['data'] | (Columns[K]['_']['notNull'] extends true ? never : null) } {
  const mapped: Record<string, unknown> = {}
  for (const [key, column] of Object.entries(columns)) {
    const value = row[column.name]
    mapped[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value)
  }
  return mapped as never
}

/**
 * A statement's text with its parameters renumbered after `shift` others ($1 → $(1 + shift)), to
 * embed it in a larger statement. Texts come from defineStatement or are written with every value
 * a parameter, so `$n` never appears inside a literal.
 */
export function shiftParams(text: string, shift: number): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + shift}`)
}

/**
 * A BoundStatement as drizzle SQL, each `$n` its value: to run it through drizzle (`tx.execute`) on
 * a transaction whose driver does not send deferred writes itself.
 */
export function asDrizzleSql(statement: BoundStatement): SQL {
  const parts = statement.text.split(/\$(\d+)/)
  return sql.join(parts.map((part, index) => (index % 2 === 1 ? sql`${new Param(statement.params[Number(part) - 1])}` : sql.raw(part))))
}
