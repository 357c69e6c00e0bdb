/** drizzle wraps driver errors: the SQLSTATE or socket error code sits on `.cause`. */

interface DriverErrorFields { code?: unknown }

function* errorChain(error: unknown): Generator<DriverErrorFields> {
  let current: unknown = error
  for (let depth = 0; current && typeof current === 'object' && depth < 5; depth++) {
    yield current as DriverErrorFields
    current = (current as { cause?: unknown }).cause
  }
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

/**
 * The constraint a unique violation (23505) names, else undefined. postgres.js calls the field
 * `constraint_name`, PGlite `constraint`.
 */
export function violatedUniqueConstraint(error: unknown): string | undefined {
  for (const e of errorChain(error) as Generator<DriverErrorFields & { constraint_name?: unknown, constraint?: unknown }>) {
    if (e.code !== '23505') continue
    const name = e.constraint_name ?? e.constraint
    return typeof name === 'string' ? name : ''
  }
  return undefined
}

/** lock_timeout ran out (55P03): the statement waited on another transaction for too long. */
export function isLockTimeout(error: unknown): boolean {
  return [...errorChain(error)].some(e => e.code === '55P03')
}
