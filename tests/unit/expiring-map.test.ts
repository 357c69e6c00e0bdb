import { describe, expect, it } from 'vitest'
import { ExpiringMap } from '../../server/cache/expiring-map'

describe('ExpiringMap', () => {
  it('answers an entry until its expiry, then forgets it', () => {
    const map = new ExpiringMap<string>(10)
    map.set('a', 'first', 1_000)
    expect(map.get('a', 999)).toBe('first')
    expect(map.get('a', 1_000)).toBeUndefined()
    expect(map.size).toBe(0)
  })

  it('never stores past its bound: the least recently used entry goes first', () => {
    const map = new ExpiringMap<number>(3)
    map.set('a', 1, Infinity)
    map.set('b', 2, Infinity)
    map.set('c', 3, Infinity)
    expect(map.get('a')).toBe(1) // a is now the most recent, b the least
    map.set('d', 4, Infinity)
    expect(map.size).toBe(3)
    expect(map.get('b')).toBeUndefined()
    expect([map.get('a'), map.get('c'), map.get('d')]).toEqual([1, 3, 4])
  })

  it('replaces an entry in place and deletes on request', () => {
    const map = new ExpiringMap<string>(2)
    map.set('a', 'old', Infinity)
    map.set('a', 'new', Infinity)
    map.set('b', 'other', Infinity)
    expect(map.size).toBe(2)
    expect(map.get('a')).toBe('new')
    map.delete('a')
    expect(map.get('a')).toBeUndefined()
    expect(map.get('b')).toBe('other')
  })
})
