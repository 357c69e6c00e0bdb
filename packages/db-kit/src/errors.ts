import { DrizzleQueryError } from 'drizzle-orm'

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

const isUnavailableCode = (code: unknown): code is string => typeof code === 'string' && (unavailableCodes.has(code) || code.startsWith('08'))

/** True when the database could not be reached, as opposed to a query that was wrong. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (const e of errorChain(error)) {
    if (isUnavailableCode(e.code)) return true
  }
  return false
}

/** Condition names (PostgreSQL, Appendix A) of the SQLSTATEs this app meets or may meet. */
const conditionNames: Record<string, string> = {
  '08000': 'connection_exception', '08003': 'connection_does_not_exist', '08006': 'connection_failure', '08001': 'sqlclient_unable_to_establish_sqlconnection', '08P01': 'protocol_violation',
  '22001': 'string_data_right_truncation', '22003': 'numeric_value_out_of_range', '22007': 'invalid_datetime_format', '22008': 'datetime_field_overflow',
  '22012': 'division_by_zero', '22021': 'character_not_in_repertoire', '22023': 'invalid_parameter_value', '22P02': 'invalid_text_representation', '22P05': 'untranslatable_character',
  '23502': 'not_null_violation', '23503': 'foreign_key_violation', '23505': 'unique_violation', '23514': 'check_violation', '23P01': 'exclusion_violation',
  '25P02': 'in_failed_sql_transaction', '25P03': 'idle_in_transaction_session_timeout',
  '40001': 'serialization_failure', '40P01': 'deadlock_detected',
  '42601': 'syntax_error', '42501': 'insufficient_privilege', '42703': 'undefined_column', '42883': 'undefined_function', '42P01': 'undefined_table', '42804': 'datatype_mismatch',
  '53100': 'disk_full', '53200': 'out_of_memory', '53300': 'too_many_connections', '54000': 'program_limit_exceeded',
  '55P03': 'lock_not_available', '57014': 'query_canceled', '57P01': 'admin_shutdown', '57P02': 'crash_shutdown', '57P03': 'cannot_connect_now', '58030': 'io_error',
  'XX000': 'internal_error', 'XX001': 'data_corrupted',
}
/** The class (first two characters) of any other SQLSTATE. */
const classNames: Record<string, string> = {
  '08': 'connection_exception', '0A': 'feature_not_supported', '21': 'cardinality_violation', '22': 'data_exception', '23': 'integrity_constraint_violation',
  '25': 'invalid_transaction_state', '28': 'invalid_authorization_specification', '3D': 'invalid_catalog_name', '40': 'transaction_rollback',
  '42': 'syntax_error_or_access_rule_violation', '53': 'insufficient_resources', '54': 'program_limit_exceeded', '55': 'object_not_in_prerequisite_state',
  '57': 'operator_intervention', '58': 'system_error', 'F0': 'config_file_error', 'P0': 'plpgsql_error', 'XX': 'internal_error',
}

interface ServerErrorFields { code: string, severity: unknown, constraint_name?: unknown, constraint?: unknown }

/** An error the server sent (postgres.js' PostgresError, PGlite's DatabaseError): a SQLSTATE and a severity. */
const isServerError = (e: DriverErrorFields): e is ServerErrorFields =>
  typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && 'severity' in e

/**
 * A database failure as text fit for logs and stored error summaries: the SQLSTATE with its
 * condition name and the constraint (`database error 23505 unique_violation on
 * orders_tenant_cart_unique`), or the connection error's code. Never the driver's message, which
 * quotes values (`invalid input syntax for type integer: "a@b.co"`), nor drizzle's `Failed query:
 * <sql> params: <values>`, which carries customer emails and raw webhook bodies. Undefined when
 * `error` is not a database failure.
 */
export function describeDatabaseError(error: unknown): string | undefined {
  let failedQuery = false
  let unavailableCode: string | undefined
  for (const e of errorChain(error)) {
    if (isServerError(e)) {
      const name = conditionNames[e.code] ?? classNames[e.code.slice(0, 2)] ?? 'unknown_condition'
      const constraint = e.constraint_name ?? e.constraint
      return `database error ${e.code} ${name}${typeof constraint === 'string' && constraint ? ` on ${constraint}` : ''}`
    }
    if (e instanceof DrizzleQueryError) failedQuery = true
    else if (isUnavailableCode(e.code)) unavailableCode ??= e.code
  }
  // A socket error is the database's only under a failed query (a webhook delivery's fetch has them too);
  // postgres.js' own connection codes are always the database's.
  if (unavailableCode && (failedQuery || unavailableCode.startsWith('CONNECT'))) return `database unavailable: ${unavailableCode}`
  // A query that failed in the driver, without a server error (a value it could not encode, say): its message may quote the value.
  return failedQuery ? 'database error without a SQLSTATE: the query failed in the driver' : undefined
}

/**
 * The constraint a unique (23505) or check (23514) violation names, else undefined: a business rule
 * the database refused the writes for (a cart ordered twice, stock that would go below what it
 * holds), which the same writes would meet again.
 */
export function violatedConstraint(error: unknown): string | undefined {
  for (const e of errorChain(error) as Generator<DriverErrorFields & { constraint_name?: unknown, constraint?: unknown }>) {
    if (e.code !== '23505' && e.code !== '23514') continue
    const name = e.constraint_name ?? e.constraint
    return typeof name === 'string' ? name : ''
  }
  return undefined
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

/**
 * The SQLSTATE of a refusal for the statement's own data — class 22 (data exception) or 23
 * (integrity constraint violation), which the same values would meet again — or undefined for any
 * other failure (the connection, the server), which a retry may cure.
 */
export function dataRefusalCode(error: unknown): string | undefined {
  if (isDatabaseUnavailable(error)) return undefined
  for (const e of errorChain(error)) {
    if (isServerError(e) && /^2[23]/.test(e.code)) return e.code
  }
  return undefined
}

/** lock_timeout ran out (55P03): the statement waited on another transaction for too long. */
export function isLockTimeout(error: unknown): boolean {
  return [...errorChain(error)].some(e => e.code === '55P03')
}

/**
 * The database URL in session mode (the default) reached a transaction pooler (PgBouncer, Supavisor,
 * RDS Proxy), which refused the connection's startup settings. The caller words the fix with its own
 * setting names: `poolMode: 'transaction'`, and `directUrl` for migrations and LISTEN.
 */
export class TransactionPoolerError extends Error {
  override name = 'TransactionPoolerError'
}
