import { describe, expect, it } from 'vitest'
import { createReplaySampler, isRoutineRead, SLOW_REQUEST_MS } from '../../server/observability/request-log'

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

describe('replay lines: the first of each key in a minute at info, the rest at debug', () => {
  const minute = Date.UTC(2026, 11, 6, 9, 14)

  it('a key replayed all minute long logs once, and once again the next minute', () => {
    const routine = createReplaySampler()
    expect(routine('tenant:ten_1', 'key-1', minute)).toBe(false)
    for (let second = 0; second < 60; second++) expect(routine('tenant:ten_1', 'key-1', minute + second * 1000), `second ${second}`).toBe(true)
    expect(routine('tenant:ten_1', 'key-1', minute + 60_000)).toBe(false)
    expect(routine('tenant:ten_1', 'key-1', minute + 60_001)).toBe(true)
  })

  it('keys apart, scopes apart: another key or the same key of another scope logs its own first line', () => {
    const routine = createReplaySampler()
    expect(routine('tenant:ten_1', 'key-1', minute)).toBe(false)
    expect(routine('tenant:ten_1', 'key-2', minute)).toBe(false)
    expect(routine('tenant:ten_2', 'key-1', minute)).toBe(false)
    expect(routine('provider:stripe', 'key-1', minute)).toBe(false)
    expect(routine('tenant:ten_1', 'key-1', minute + 1)).toBe(true)
  })

  it('bounded: past its size the oldest keys are forgotten and log again, never the other way round', () => {
    const routine = createReplaySampler(2)
    expect(['a', 'b', 'c'].map(key => routine('s', key, minute))).toEqual([false, false, false])
    // 'a' left to make room for 'c': its next replay logs again rather than staying silent.
    expect(routine('s', 'a', minute + 1)).toBe(false)
    expect(routine('s', 'c', minute + 1)).toBe(true)
  })
})
