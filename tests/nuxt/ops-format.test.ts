import { describe, expect, it } from 'vitest'
import { formatTime } from '~/composables/useOps'

describe('formatTime: the console\'s one way to show an instant', () => {
  it('is ISO 8601 in UTC with milliseconds, whatever the local zone and locale', () => {
    expect(formatTime('2026-12-01T09:14:03.120Z')).toBe('2026-12-01 09:14:03.120Z')
    // An offset is turned into UTC: 1 December, not 12 January or a local hour.
    expect(formatTime('2026-12-01T16:14:03+07:00')).toBe('2026-12-01 09:14:03.000Z')
    expect(formatTime('2026-01-12T00:00:00.005Z')).toBe('2026-01-12 00:00:00.005Z')
  })

  it('shows a dash for no time and an unreadable one as it came', () => {
    expect(formatTime(null)).toBe('—')
    expect(formatTime(undefined)).toBe('—')
    expect(formatTime('')).toBe('—')
    expect(formatTime('yesterday')).toBe('yesterday')
  })
})
