/** Rows of a raw query (`db.execute`), whichever driver ran it: postgres.js answers an array, PGlite `{ rows }`. */
export function rowsOf<T = Record<string, unknown>>(result: unknown): T[] {
  return Array.isArray(result) ? result as T[] : (result as { rows: T[] }).rows
}
