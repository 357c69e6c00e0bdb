import { DrizzleQueryError } from 'drizzle-orm'
import { describe, expect, it } from 'vitest'
import { describeDatabaseError, isDatabaseUnavailable } from '@idempotent-checkout/db-kit'
import { describeError, RetryableJobError } from '../../server/jobs/errors'
import { serializeError } from '../../server/observability/logger'

// A failed query's text must never reach a log line or a stored error summary with its values:
// drizzle's message is `Failed query: <sql>\nparams: <values>` and the driver's own message and
// detail quote values too. What is kept is the SQLSTATE, its condition name and the constraint.

const EMAIL = 'shopper.private@example.com'
const ORDER_INSERT = 'insert into "orders" ("id", "tenant_id", "cart_id", "customer") values ($1, $2, $3, $4)'
const ORDER_PARAMS = ['ord_1', 'ten_1', 'crt_1', JSON.stringify({ email: EMAIL })]

/** A server error as postgres.js reports it (PostgresError: constraint_name, and the detail quoting the row). */
function postgresError(code: string, message: string, fields: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), { name: 'PostgresError', severity_local: 'ERROR', severity: 'ERROR', code, ...fields })
}

/** drizzle's wrapper around a driver error, exactly as its sessions throw it. */
const failedQuery = (cause: unknown) => new DrizzleQueryError(ORDER_INSERT, ORDER_PARAMS, cause as Error)

const cartViolation = () => failedQuery(postgresError('23505', 'duplicate key value violates unique constraint "orders_tenant_cart_unique"', {
  constraint_name: 'orders_tenant_cart_unique',
  detail: `Key (tenant_id, cart_id)=(ten_1, ${EMAIL}) already exists.`,
}))

/** Everything a text could leak: the value, drizzle's framing, the query. */
function expectNoQueryText(text: string): void {
  expect(text).not.toContain(EMAIL)
  expect(text).not.toContain('params')
  expect(text).not.toContain('Failed query')
  expect(text).not.toContain('insert into')
}

describe('describeDatabaseError', () => {
  it('a unique violation: SQLSTATE, condition name and constraint, not the values drizzle\'s message carries', () => {
    const error = cartViolation()
    // The hazard: drizzle's own message holds the parameters.
    expect(error.message).toContain(EMAIL)
    expect(error.message).toContain('params:')
    const described = describeDatabaseError(error)
    expect(described).toBe('database error 23505 unique_violation on orders_tenant_cart_unique')
    expectNoQueryText(described!)
  })

  it('a server error without a constraint, whose message quotes the value: the fixed text of its SQLSTATE', () => {
    const error = failedQuery(postgresError('22P02', `invalid input syntax for type integer: "${EMAIL}"`))
    expect(describeDatabaseError(error)).toBe('database error 22P02 invalid_text_representation')
    // A SQLSTATE the table does not name: its class.
    expect(describeDatabaseError(failedQuery(postgresError('2201B', `invalid regular expression: ${EMAIL}`)))).toBe('database error 2201B data_exception')
    expect(describeDatabaseError(failedQuery(postgresError('ZZ999', EMAIL)))).toBe('database error ZZ999 unknown_condition')
  })

  it('PGlite\'s field name for the constraint', () => {
    const error = failedQuery(Object.assign(new Error(`duplicate key ${EMAIL}`), { severity: 'ERROR', code: '23505', constraint: 'webhook_events_provider_event_unique' }))
    expect(describeDatabaseError(error)).toBe('database error 23505 unique_violation on webhook_events_provider_event_unique')
  })

  it('a connection failure: its code, and still unavailable', () => {
    const error = failedQuery(Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' }))
    expect(describeDatabaseError(error)).toBe('database unavailable: CONNECTION_CLOSED')
    expect(isDatabaseUnavailable(error)).toBe(true)
    expect(describeDatabaseError(postgresError('57P01', 'terminating connection due to administrator command'))).toBe('database error 57P01 admin_shutdown')
  })

  it('a query that failed in the driver, without a server error: a fixed text, not the driver\'s message', () => {
    const error = failedQuery(new TypeError(`Cannot serialize ${EMAIL}`))
    expect(describeDatabaseError(error)).toBe('database error without a SQLSTATE: the query failed in the driver')
  })

  it('finds the failure under a wrapper that copied its message (h3\'s createError does)', () => {
    const inner = cartViolation()
    const wrapper = Object.assign(new Error(inner.message, { cause: inner }), { statusCode: 500 })
    expect(describeDatabaseError(wrapper)).toBe('database error 23505 unique_violation on orders_tenant_cart_unique')
  })

  it('is undefined for anything else: a socket-like code without a severity, a fetch that found nothing listening', () => {
    expect(describeDatabaseError(new Error('provider exploded'))).toBeUndefined()
    // A webhook delivery's failure is not the database's, although its cause has a connection code.
    const fetchFailed = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) })
    expect(describeDatabaseError(fetchFailed)).toBeUndefined()
    expect(describeError(fetchFailed)).toBe('TypeError: fetch failed')
    expect(describeDatabaseError(Object.assign(new Error('write CONNECTION_ENDED 127.0.0.1:5432'), { code: 'CONNECTION_ENDED' }))).toBe('database unavailable: CONNECTION_ENDED')
    expect(describeDatabaseError(Object.assign(new Error('x'), { code: 'EPERM' }))).toBeUndefined()
    expect(describeDatabaseError('a string')).toBeUndefined()
    expect(describeDatabaseError(undefined)).toBeUndefined()
  })
})

describe('what is stored and logged', () => {
  it('the job runner\'s describeError (jobs.last_error, jobs.errors[].message)', () => {
    expect(describeError(cartViolation())).toBe('database error 23505 unique_violation on orders_tenant_cart_unique')
    expect(describeError(new RetryableJobError('webhook endpoint answered 500'))).toBe('RetryableJobError: webhook endpoint answered 500')
    expect(describeError('thrown string')).toBe('thrown string')
    // A provider's message with a NUL or another control character: stored escaped, never refused by Postgres.
    expect(describeError(new RetryableJobError('bad\u0000gateway\u007f'))).toBe('RetryableJobError: bad%00gateway%7F')
  })

  it('the logger\'s error serializer: the message and the stack\'s first line replaced, the frames kept', () => {
    const error = cartViolation()
    const serialized = serializeError(error) as { name: string, message: string, stack: string }
    // drizzle leaves the name at Error.
    expect(serialized).toEqual({ name: 'Error', message: 'database error 23505 unique_violation on orders_tenant_cart_unique', stack: expect.any(String) })
    const [first, ...frames] = serialized.stack.split('\n')
    expect(first).toBe('Error: database error 23505 unique_violation on orders_tenant_cart_unique')
    expect(frames.length).toBeGreaterThan(0)
    for (const frame of frames) expect(frame).toMatch(/^\s+at /)
    expectNoQueryText(JSON.stringify(serialized))
  })

  it('the logger\'s error serializer leaves other errors as they are', () => {
    const error = Object.assign(new Error('lock backend unavailable'), { code: 'ECONNREFUSED_LOCKS' })
    expect(serializeError(error)).toEqual({ name: 'Error', message: 'lock backend unavailable', code: 'ECONNREFUSED_LOCKS', stack: error.stack })
    expect(serializeError({ not: 'an error' })).toEqual({ not: 'an error' })
  })
})
