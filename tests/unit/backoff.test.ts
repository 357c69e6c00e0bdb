import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { BACKOFF_JITTER, backoffMs, type BackoffPolicy } from '../../server/jobs/backoff'

const policy: BackoffPolicy = { baseMs: 1_000, capMs: 60_000 }

/** random() = 0.5 puts the jitter at exactly zero; 0 and just below 1 are its two extremes. */
const noJitter = () => 0.5
const lowestJitter = () => 0
const highestJitter = () => 0.999999

describe('backoffMs', () => {
  it('doubles from the base with no jitter: 1 s, 2 s, 4 s, … until the cap', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8, 9].map(attempt => backoffMs(attempt, policy, noJitter))
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000])
  })

  it('waits exactly the base after the first attempt', () => {
    expect(backoffMs(1, { baseMs: 250, capMs: 10_000 }, noJitter)).toBe(250)
    expect(backoffMs(1, { baseMs: 7, capMs: 10_000 }, noJitter)).toBe(7)
  })

  it('treats an attempt below 1 like the first, instead of shrinking below the base', () => {
    expect(backoffMs(0, policy, noJitter)).toBe(1_000)
    expect(backoffMs(-3, policy, noJitter)).toBe(1_000)
  })

  it('never exceeds the cap, however many attempts failed', () => {
    expect(backoffMs(7, policy, noJitter)).toBe(60_000)
    expect(backoffMs(40, policy, noJitter)).toBe(60_000)
    expect(backoffMs(1_000, policy, noJitter)).toBe(60_000)
    // A cap below the base wins over the base as well.
    expect(backoffMs(1, { baseMs: 5_000, capMs: 3_000 }, noJitter)).toBe(3_000)
  })

  it('grows monotonically with the attempt until the cap, then stays there', () => {
    const delays = Array.from({ length: 30 }, (_, i) => backoffMs(i + 1, { baseMs: 100, capMs: 50_000 }, noJitter))
    for (let i = 1; i < delays.length; i++) {
      const previous = delays[i - 1]!
      if (previous < 50_000) expect(delays[i]).toBe(Math.min(50_000, previous * 2))
      else expect(delays[i]).toBe(50_000)
    }
    expect(delays.indexOf(50_000)).toBe(9)
  })

  it('spreads the delay by 20 % below and above', () => {
    expect(BACKOFF_JITTER).toBe(0.2)
    expect(backoffMs(1, policy, lowestJitter)).toBe(800)
    expect(backoffMs(1, policy, highestJitter)).toBe(1_200)
    expect(backoffMs(3, policy, lowestJitter)).toBe(3_200)
    expect(backoffMs(3, policy, highestJitter)).toBe(4_800)
    // The jitter applies to the capped delay too, so capped retries still spread out.
    expect(backoffMs(20, policy, lowestJitter)).toBe(48_000)
    expect(backoffMs(20, policy, highestJitter)).toBe(72_000)
  })

  it('returns whole milliseconds', () => {
    expect(backoffMs(1, { baseMs: 3, capMs: 100 }, () => 0.3)).toBe(3)
    expect(backoffMs(2, { baseMs: 333, capMs: 10_000 }, () => 0.7)).toBe(719)
  })

  it('is never negative, even for a zero base or a random source outside [0, 1)', () => {
    expect(backoffMs(1, { baseMs: 0, capMs: 1_000 }, lowestJitter)).toBe(0)
    expect(backoffMs(5, policy, () => -10)).toBe(0)
  })

  it('stays within ±20 % of min(cap, base · 2^(attempt-1)) for any attempt, policy and random value', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 40 }),
      fc.integer({ min: 1, max: 60 * 60 * 1000 }),
      fc.integer({ min: 1, max: 24 * 60 * 60 * 1000 }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      (attempt, baseMs, capMs, randomValue) => {
        const delay = backoffMs(attempt, { baseMs, capMs }, () => randomValue)
        const exponential = Math.min(capMs, baseMs * 2 ** (attempt - 1))
        expect(Number.isInteger(delay)).toBe(true)
        expect(delay).toBeGreaterThanOrEqual(0)
        // Rounding to whole milliseconds may move the result by up to half of one.
        expect(delay).toBeGreaterThanOrEqual(0.8 * exponential - 1)
        expect(delay).toBeLessThanOrEqual(1.2 * exponential + 1)
      },
    ))
  })
})
