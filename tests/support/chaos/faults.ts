import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type { Pgbouncer } from '../pgbouncer.mjs'
import type { TestRedisServer } from '../redis-server'
import type { Fleet } from './fleet'
import type { TestPostgresServer } from './postgres-server'

/**
 * The faults the chaos run injects while its load runs, on a schedule scaled to the run's length:
 * a random app instance SIGKILLed about every 10 s (never the last one up), one worker SIGKILLed
 * once, Redis flushed and then gone for 5 s, Postgres crashed (immediate stop) for 5 s, and the
 * pooler in front of Postgres, when there is one, SIGKILLed and gone for 5 s. The
 * supervisor brings killed processes back. Each fault is printed and kept with its time.
 */

export interface InjectedFault {
  atMs: number
  fault: string
  detail: string
}

export interface FaultScheduleOptions {
  durationMs: number
  fleet: Fleet
  redis: TestRedisServer
  postgres: TestPostgresServer
  /** The pooler the fleet reaches Postgres through, if any: it is killed too, later in the run. */
  pooler?: Pgbouncer
  clock: () => number
  note: (line: string) => void
}

const instanceKillEveryMs = 10_000
const outageMs = 5_000

interface Planned { atMs: number, run: () => Promise<string>, fault: string }

export async function runFaultSchedule(options: FaultScheduleOptions): Promise<InjectedFault[]> {
  const { durationMs, fleet, redis, postgres } = options
  const plan: Planned[] = []
  // The last kill leaves time for the restart before the load ends.
  for (let atMs = 7_000; atMs < durationMs - 5_000; atMs += instanceKillEveryMs) {
    plan.push({ atMs, fault: 'SIGKILL app instance', run: async () => fleet.killRandom('app', 1) ?? 'skipped: only one instance is up' })
  }
  plan.push({ atMs: durationMs * 0.25, fault: 'SIGKILL worker', run: async () => fleet.killRandom('worker', 0) ?? 'skipped: no worker is up' })
  plan.push({
    atMs: durationMs * 0.4,
    fault: 'Redis FLUSHALL, then down 5 s',
    run: async () => {
      const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 })
      try {
        await client.connect()
        await client.flushall()
      }
      finally {
        client.disconnect()
      }
      await redis.stop()
      options.note('Redis flushed and stopped')
      await sleep(outageMs)
      await redis.start()
      return `flushed, down ${outageMs / 1000} s, back on port ${redis.port}`
    },
  })
  /** A server taken away for outageMs, then started again on its port. */
  const outage = (atMs: number, fault: string, server: { port: number, start: () => Promise<void> }, takeDown: () => Promise<void>, downNote: string, backDetail: string): Planned => ({
    atMs,
    fault,
    run: async () => {
      await takeDown()
      options.note(downNote)
      await sleep(outageMs)
      await server.start()
      return `down ${outageMs / 1000} s, ${backDetail} on port ${server.port}`
    },
  })
  plan.push(outage(durationMs * 0.65, 'Postgres crash (immediate stop), down 5 s', postgres, () => postgres.crash(), 'Postgres stopped (immediate)', 'recovered and back'))
  if (options.pooler) plan.push(outage(durationMs * 0.85, 'PgBouncer SIGKILL, down 5 s', options.pooler, () => options.pooler!.kill(), 'PgBouncer killed', 'back'))
  plan.sort((a, b) => a.atMs - b.atMs)

  const injected: InjectedFault[] = []
  // Outages run alongside the instance kills, not one after the other.
  const running: Array<Promise<void>> = []
  for (const planned of plan) {
    const wait = planned.atMs - options.clock()
    if (wait > 0) await sleep(wait)
    const atMs = options.clock()
    running.push(planned.run().then((detail) => {
      injected.push({ atMs, fault: planned.fault, detail })
      options.note(`${planned.fault}: ${detail}`)
    }))
  }
  await Promise.all(running)
  return injected.sort((a, b) => a.atMs - b.atMs)
}
