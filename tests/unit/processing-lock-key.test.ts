import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { processingLockKey } from '../../packages/nuxt-idempotency/src/runtime/core/run'

// The processing lock's name (server/idempotency/core.ts): a key too long for a Redis key is hashed.
// Keys are any 1–255 visible ASCII characters, so a hashed name must be one no raw key can spell.

const scope = 'tenant:ten_1'
const longKey = 'k'.repeat(201)
const hashedLookalike = `sha256:${createHash('sha256').update(longKey).digest('hex')}`

describe('processingLockKey', () => {
  it('gives a long key and the key spelling its hashed name two different locks', () => {
    expect(hashedLookalike.length).toBeLessThanOrEqual(255)
    expect(processingLockKey(scope, hashedLookalike)).not.toBe(processingLockKey(scope, longKey))
  })

  it('keeps short keys readable and tells them apart from hashed ones', () => {
    expect(processingLockKey(scope, 'order-1')).toBe('idempotency:tenant:ten_1:key:order-1')
    expect(processingLockKey(scope, longKey)).toBe(`idempotency:tenant:ten_1:${hashedLookalike}`)
  })

  it('gives the same key the same lock, and two long keys two locks', () => {
    expect(processingLockKey(scope, longKey)).toBe(processingLockKey(scope, longKey))
    expect(processingLockKey(scope, `${longKey}x`)).not.toBe(processingLockKey(scope, longKey))
  })
})
