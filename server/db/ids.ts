import { randomBytes } from 'node:crypto'

/** Prefixed random identifiers (`ord_…`, `ten_…`): 120 bits, URL-safe, self-describing in logs. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(15).toString('base64url')}`
}
