import { describe, expect, it } from 'vitest'
import { idempotencyProblem } from 'nuxt-idempotency/core'
import { problem } from '../../server/problems'

const framesOf = (error: Error) => (error.stack ?? '').split('\n').filter(line => /^\s+at /.test(line))

describe('problem()', () => {
  it('is an answer, not a fault: no stack frames of its own, its cause keeps its own, and Error.stackTraceLimit is left as it was', () => {
    const limit = Error.stackTraceLimit
    const cause = new Error('connection refused')
    const error = problem('service-unavailable', 'The database is not ready. Retry after Retry-After seconds.', { cause, headers: { 'Retry-After': '5' } })
    expect(error.statusCode).toBe(503)
    expect(error.data).toEqual({
      problem: { type: '/problems/service-unavailable', title: 'Service unavailable', status: 503, detail: 'The database is not ready. Retry after Retry-After seconds.' },
      headers: { 'Retry-After': '5' },
    })
    expect(framesOf(error)).toEqual([])
    expect(error.cause).toBe(cause)
    expect(framesOf(cause).length).toBeGreaterThan(0)
    expect(Error.stackTraceLimit).toBe(limit)
    expect(framesOf(new Error('after')).length).toBeGreaterThan(0)
  })
  it('the idempotency layer\'s own problems are built the same way: no stack frames, the limit left as it was', () => {
    const limit = Error.stackTraceLimit
    const error = idempotencyProblem('request-in-progress', 'A request with this key is still running.', { 'Retry-After': '1' })
    expect(error.statusCode).toBe(409)
    expect(error.data).toEqual({
      problem: { type: '/problems/request-in-progress', title: 'Request with this key is in progress', status: 409, detail: 'A request with this key is still running.' },
      headers: { 'Retry-After': '1' },
    })
    expect(framesOf(error)).toEqual([])
    expect(Error.stackTraceLimit).toBe(limit)
  })
})
