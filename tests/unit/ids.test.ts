import { describe, expect, it } from 'vitest'
import { newId } from '../../server/db/ids'

describe('newId', () => {
  it('is the prefix and 120 random bits in base64url', () => {
    const id = newId('ord')
    expect(id).toMatch(/^ord_[\w-]{20}$/)
    expect(Buffer.from(id.slice(4), 'base64url')).toHaveLength(15)
  })

  it('never hands out the same bytes twice, across many refills of its pool', () => {
    // 256 ids per draw from the CSPRNG: these span forty draws.
    const ids = Array.from({ length: 10_000 }, () => newId('job'))
    expect(ids.every(id => /^job_[\w-]{20}$/.test(id))).toBe(true)
    expect(new Set(ids).size).toBe(ids.length)
    expect(new Set(ids.map(id => id.slice(4, 12))).size).toBe(ids.length)
  })
})
