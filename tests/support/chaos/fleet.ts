import { setTimeout as sleep } from 'node:timers/promises'
import { type AppProcess, startApp } from '../app'
import type { ManagedProcess } from '../processes'
import { startWorker } from '../worker'

/**
 * The chaos run's processes: app instances and standalone workers under a supervisor that, like an
 * orchestrator, restarts any of them that died (SIGKILL by the fault schedule, crash-after-commit)
 * about a second later. A restarted app listens on a new port: read the live list, never keep one.
 */

export interface FleetOptions {
  databaseUrl: string
  redisUrl: string
  redisKeyPrefix: string
  appCount: number
  workerCount: number
  appEnv: Record<string, string>
  workerEnv: Record<string, string>
  /** Milliseconds since the run started, for the printed times. */
  clock: () => number
}

export interface FleetEvent {
  atMs: number
  member: string
  event: 'died' | 'restarted' | 'restart failed'
  detail: string
  /** The end of what a process that exited by itself wrote: such an exit is a finding. */
  lastOutput?: string
}

interface Member {
  name: string
  kind: 'app' | 'worker'
  process?: ManagedProcess
  url?: string
  /** The next death is one the schedule caused (so it is not reported as unexplained). */
  killedOnPurpose: boolean
  supervision?: Promise<void>
}

export interface Fleet {
  /** Base URLs of the app instances that are up right now. */
  liveAppUrls: () => string[]
  /**
   * SIGKILLs a random live member of that kind, unless no more than `spare` of them are up (the
   * run is about faults the system must survive, not a total blackout); returns its name, or
   * undefined when it spared them.
   */
  killRandom: (kind: 'app' | 'worker', spare: number) => string | undefined
  /** Resolves once every member is up again (bounded). */
  allUp: (timeoutMs: number) => Promise<void>
  events: FleetEvent[]
  stop: () => Promise<void>
}

const restartDelayMs = 1_000
const lastOutputChars = 4_000

export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const members: Member[] = [
    ...Array.from({ length: options.appCount }, (_, index): Member => ({ name: `app-${index + 1}`, kind: 'app', killedOnPurpose: false })),
    ...Array.from({ length: options.workerCount }, (_, index): Member => ({ name: `worker-${index + 1}`, kind: 'worker', killedOnPurpose: false })),
  ]
  const events: FleetEvent[] = []
  let stopping = false

  const launch = async (member: Member): Promise<void> => {
    if (member.kind === 'app') {
      const app: AppProcess = await startApp({
        databaseUrl: options.databaseUrl,
        redisUrl: options.redisUrl,
        label: `chaos-${member.name}`,
        env: { ...options.appEnv, REDIS_KEY_PREFIX: options.redisKeyPrefix },
      })
      member.url = app.url
      member.process = app
    }
    else {
      member.process = await startWorker({
        databaseUrl: options.databaseUrl,
        redisUrl: options.redisUrl,
        redisKeyPrefix: options.redisKeyPrefix,
        label: `chaos-${member.name}`,
        env: options.workerEnv,
      })
    }
  }

  /** Waits for the member's death, then restarts it until that works, for as long as the run lasts. */
  const supervise = async (member: Member): Promise<void> => {
    while (!stopping) {
      const current = member.process!
      const code = await current.exited
      if (stopping) return
      member.url = undefined
      const cause = member.killedOnPurpose
        ? 'SIGKILL by the schedule'
        : code === null ? 'killed by a signal (crash-after-commit)' : `exited by itself with code ${code}`
      events.push({
        atMs: options.clock(),
        member: member.name,
        event: 'died',
        detail: `pid ${current.pid}: ${cause}`,
        ...(!member.killedOnPurpose && code !== null && { lastOutput: current.output().slice(-lastOutputChars) }),
      })
      member.killedOnPurpose = false
      for (;;) {
        await sleep(restartDelayMs)
        if (stopping) return
        try {
          await launch(member)
          events.push({ atMs: options.clock(), member: member.name, event: 'restarted', detail: `pid ${member.process!.pid}${member.url ? ` on ${member.url}` : ''}` })
          break
        }
        catch (error) {
          // E.g. Postgres is down: the app exits before it is ready. Try again, as an orchestrator would.
          events.push({ atMs: options.clock(), member: member.name, event: 'restart failed', detail: (error as Error).message.split('\n')[0]! })
        }
      }
    }
  }

  await Promise.all(members.map(launch))
  for (const member of members) member.supervision = supervise(member)

  const live = (kind: 'app' | 'worker') => members.filter(member => member.kind === kind && member.process && !member.process.hasExited() && (kind === 'worker' || member.url))

  return {
    liveAppUrls: () => live('app').map(member => member.url!),
    killRandom(kind, spare) {
      const candidates = live(kind)
      if (candidates.length <= spare) return undefined
      const victim = candidates[Math.floor(Math.random() * candidates.length)]!
      victim.killedOnPurpose = true
      victim.process!.kill('SIGKILL')
      return `${victim.name} (pid ${victim.process!.pid})`
    },
    async allUp(timeoutMs) {
      const deadline = Date.now() + timeoutMs
      while (live('app').length + live('worker').length < members.length) {
        if (Date.now() > deadline) throw new Error(`not every process is up after ${timeoutMs} ms: ${JSON.stringify(events.slice(-5))}`)
        await sleep(200)
      }
    },
    events,
    async stop() {
      stopping = true
      await Promise.all(members.map(member => member.process?.stop()))
      // A restart that was under way when the run ended starts a process: stop that one too.
      await Promise.all(members.map(member => member.supervision))
      await Promise.all(members.map(member => member.process?.stop()))
    },
  }
}
