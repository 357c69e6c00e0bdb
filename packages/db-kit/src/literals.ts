import type { BoundStatement } from './types'

/**
 * A statement's text with each `$n` replaced by its value as a quoted literal, for a connection
 * behind a transaction pooler. There statements cannot be prepared, and postgres.js sends an
 * unprepared statement that has parameters in two round trips: it asks the server for the
 * parameters' types first (Parse/Describe, wait, then Bind/Execute). A text without parameters
 * goes in one. Every literal is quoted, so Postgres types it as it would type the parameter (an
 * `unknown` literal resolved by its context): `'5'` where `5` would be an integer.
 *
 * Texts come from defineStatement or are written with every value a parameter, so `$n` never
 * appears inside a literal of the text itself (the same rule shiftParams relies on). Strings are
 * written as E'…' with backslashes and quotes doubled: safe whatever standard_conforming_strings is.
 */
export function withLiterals(statement: BoundStatement): string {
  if (!statement.params.length) return statement.text
  return statement.text.replace(/\$(\d+)/g, (placeholder, n: string) => {
    const index = Number(n) - 1
    if (index < 0 || index >= statement.params.length) throw new Error(`Statement parameter ${placeholder} has no value (${statement.params.length} given).`)
    return literal(statement.params[index])
  })
}

/** One value as a quoted SQL literal, in the text form postgres.js would send it as a parameter. */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL'
  return quoted(text(value))
}

function text(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value
    case 'number':
      if (!Number.isFinite(value)) return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity'
      return String(value)
    case 'bigint':
      return String(value)
    case 'boolean':
      return value ? 't' : 'f'
    case 'object':
      if (value instanceof Date) return value.toISOString()
      if (value instanceof Uint8Array) return `\\x${Buffer.from(value).toString('hex')}`
      if (Array.isArray(value)) return arrayText(value)
      return JSON.stringify(value)
    default:
      throw new TypeError(`A ${typeof value} cannot be sent as a statement value.`)
  }
}

/** Postgres' array input syntax: `{"a","b",NULL}`, each element double-quoted and escaped. */
function arrayText(values: unknown[]): string {
  return `{${values.map(value => (value === null || value === undefined
    ? 'NULL'
    : Array.isArray(value) ? arrayText(value) : `"${text(value).replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`
}

function quoted(value: string): string {
  if (value.includes('\0')) throw new TypeError('A statement value cannot contain a NUL character (Postgres text cannot hold one).')
  return `E'${value.replace(/\\/g, '\\\\').replace(/'/g, '\'\'')}'`
}
