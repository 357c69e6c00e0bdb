import { describe, expect, it } from 'vitest'
import { ExpiringMap } from '@idempotent-checkout/db-kit/expiring-map'

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

  it('bounds the total weight, not the count: a large value pushes out several small ones, never a read one first', () => {
    const map = new ExpiringMap<string>(10, value => value.length)
    map.set('a', 'aaa', Infinity)
    map.set('b', 'bbb', Infinity)
    map.set('c', 'ccc', Infinity)
    expect(map.weight).toBe(9)
    expect(map.get('a')).toBe('aaa') // read: a gets a second chance
    map.set('d', 'dddddd', Infinity) // needs 6: b and c go, a stays
    expect([map.get('a'), map.get('b'), map.get('c'), map.get('d')]).toEqual(['aaa', undefined, undefined, 'dddddd'])
    expect(map.weight).toBe(9)
    map.set('e', 'x'.repeat(11), Infinity) // heavier than the whole bound: not stored, nothing evicted
    expect([map.get('e'), map.size, map.weight]).toEqual([undefined, 2, 9])
  })

  it('forgets the weight of an expired entry when it is read', () => {
    const map = new ExpiringMap<string>(10, value => value.length)
    map.set('a', 'aaaa', 1_000)
    expect(map.get('a', 1_000)).toBeUndefined()
    expect([map.size, map.weight]).toEqual([0, 0])
  })
})
