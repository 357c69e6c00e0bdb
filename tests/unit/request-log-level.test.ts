import { describe, expect, it } from 'vitest'
import { isRoutineRead, SLOW_REQUEST_MS } from '../../server/observability/request-log'

const poll = { method: 'GET', status: 200, durationMs: 3, authenticatedBy: 'checkout_session' }

describe('request log lines: routine reads at debug, the rest at info', () => {
  it('a fast successful read (the checkout page polling its order, a readiness probe) is routine', () => {
    expect(isRoutineRead(poll)).toBe(true)
    expect(isRoutineRead({ ...poll, method: 'HEAD', status: 304, authenticatedBy: null })).toBe(true)
    expect(isRoutineRead({ ...poll, durationMs: SLOW_REQUEST_MS - 1 })).toBe(true)
  })

  it('writes, failures, a client that left, slow reads and operators\' reads are not', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) expect(isRoutineRead({ ...poll, method }), method).toBe(false)
    for (const status of [400, 401, 404, 409, 499, 500, 503]) expect(isRoutineRead({ ...poll, status }), String(status)).toBe(false)
    expect(isRoutineRead({ ...poll, durationMs: SLOW_REQUEST_MS })).toBe(false)
    expect(isRoutineRead({ ...poll, authenticatedBy: 'ops_token' })).toBe(false)
  })
})
