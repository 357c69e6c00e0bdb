import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { type MaintenanceService, startScheduler, untilNextRun } from '../../../server/maintenance/scheduler'

describe('untilNextRun', () => {
  it('waits for the next multiple of the interval on the clock, never zero', () => {
    expect(untilNextRun(0, 15_000)).toBe(15_000)
    expect(untilNextRun(14_999, 15_000)).toBe(1)
    expect(untilNextRun(15_000, 15_000)).toBe(15_000)
    expect(untilNextRun(61_000, 60_000)).toBe(59_000)
  })

  it('shifts the boundaries by the offset', () => {
    // Every 5 minutes at 30 s past: 00:30, 05:30, …
    expect(untilNextRun(0, 300_000, 30_000)).toBe(30_000)
    expect(untilNextRun(30_000, 300_000, 30_000)).toBe(300_000)
    expect(untilNextRun(29_000, 300_000, 30_000)).toBe(1_000)
  })
})

describe('startScheduler', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 0 })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  const service = (name: string, intervalMs: number | undefined, runOnce: () => Promise<unknown>): MaintenanceService => ({ name, intervalMs, runOnce })

  it('runs each service on its own boundaries, and an on-demand one never', async () => {
    const runs: Array<[string, number]> = []
    const scheduler = startScheduler([
      service('fast', 15_000, async () => runs.push(['fast', Date.now()])),
      service('slow', 60_000, async () => runs.push(['slow', Date.now()])),
      service('manual', undefined, async () => runs.push(['manual', Date.now()])),
    ])
    await vi.advanceTimersByTimeAsync(60_000)
    const byTimeThenName = (a: [string, number], b: [string, number]) => a[1] - b[1] || a[0].localeCompare(b[0])
    expect(runs.sort(byTimeThenName)).toEqual([['fast', 15_000], ['fast', 30_000], ['fast', 45_000], ['fast', 60_000], ['slow', 60_000]])
    await scheduler.stop()
  })

  it('never overlaps a run with the next: one that outlasts its interval skips the starts it covers', async () => {
    const starts: number[] = []
    const scheduler = startScheduler([service('long', 10_000, async () => {
      starts.push(Date.now())
      await new Promise(resolve => setTimeout(resolve, 25_000))
    })])
    await vi.advanceTimersByTimeAsync(70_000)
    // 10 s runs until 35 s; the next boundary after is 40 s, which runs until 65 s; then 70 s.
    expect(starts).toEqual([10_000, 40_000, 70_000])
    await scheduler.stop(0)
  })

  it('a failed run does not stop the schedule', async () => {
    let calls = 0
    const scheduler = startScheduler([service('flaky', 1_000, async () => {
      calls++
      if (calls === 1) throw new Error('database away')
    })])
    await vi.advanceTimersByTimeAsync(3_000)
    expect(calls).toBe(3)
    await scheduler.stop()
  })

  it('stop() starts no further run and waits for the one under way', async () => {
    let finished = false
    let calls = 0
    const scheduler = startScheduler([service('once', 1_000, async () => {
      calls++
      await new Promise(resolve => setTimeout(resolve, 500))
      finished = true
    })])
    await vi.advanceTimersByTimeAsync(1_100)
    const stopping = scheduler.stop()
    await vi.advanceTimersByTimeAsync(5_000)
    await stopping
    expect({ calls, finished }).toEqual({ calls: 1, finished: true })
  })
})
