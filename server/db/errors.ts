/**
 * drizzle wraps driver errors: the SQLSTATE sits on `.cause`, and the constraint name field differs
 * between postgres.js (`constraint_name`) and PGlite (`constraint`). These helpers look through both.
 */

interface DriverErrorFields { code?: unknown, constraint_name?: unknown, constraint?: unknown, errno?: unknown }

function* errorChain(error: unknown): Generator<DriverErrorFields> {
  let current: unknown = error
  for (let depth = 0; current && typeof current === 'object' && depth < 5; depth++) {
    yield current as DriverErrorFields
    current = (current as { cause?: unknown }).cause
  }
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  for (const e of errorChain(error)) {
    if (e.code === '23505') return !constraint || e.constraint_name === constraint || e.constraint === constraint
  }
  return false
}

// Connection-level failures: postgres.js error codes, node socket errors, and SQLSTATE classes
// 08 (connection exception), 57P01-03 (shutdown / cannot connect now) and 53300 (too many connections).
const unavailableCodes = new Set([
  'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED',
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH',
  '57P01', '57P02', '57P03', '53300',
])

/** True when the database could not be reached, as opposed to a query that was wrong. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (const e of errorChain(error)) {
    if (typeof e.code === 'string' && (unavailableCodes.has(e.code) || e.code.startsWith('08'))) return true
  }
  return false
}
