import { unlinkSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { readTextIfExists } from './files'

/**
 * PGlite is one process's database: a second process opening the same directory (say
 * `npm run tenant:create` while `npm run dev` runs) writes files the first one has cached, and
 * neither sees the other's rows. A lock file in the directory names the process holding it; it is
 * removed when that process exits, and a lock whose process is gone is taken over.
 */

export const PGLITE_LOCK_FILE = 'pglite.lock'

/** Lock files this process holds, each removed when it exits. */
const held = new Map<string, LockOwner>()

interface LockOwner {
  pid: number
  hostname: string
  command: string
  since: string
}

export class PgliteDirLockedError extends Error {
  constructor(readonly dataDir: string, readonly owner: LockOwner) {
    super(`The embedded database in ${dataDir} is in use by process ${owner.pid} (${owner.command}, since ${owner.since}): `
      + 'PGlite allows one process at a time. Stop that process first (Ctrl-C in its terminal), or use a Postgres database (DATABASE_URL) for several processes. '
      + `If no such process runs, delete ${join(dataDir, PGLITE_LOCK_FILE)}.`)
    this.name = 'PgliteDirLockedError'
  }
}

/** Locks `dataDir` for this process until it exits; throws PgliteDirLockedError while another live process holds it. */
export function holdPgliteDir(dataDir: string): void {
  const file = join(dataDir, PGLITE_LOCK_FILE)
  const mine: LockOwner = { pid: process.pid, hostname: hostname(), command: process.argv.slice(1).join(' ').slice(0, 200), since: new Date().toISOString() }
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${JSON.stringify(mine)}\n`, { flag: 'wx' })
      break
    }
    catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 2) throw error
    }
    const owner = readOwner(file)
    // This process already holds it: a `nuxt dev` reload opens the directory again in a new worker
    // thread. Rewritten as this thread's, so the old thread's exit does not remove it.
    if (owner?.pid === process.pid && owner.hostname === mine.hostname) {
      writeFileSync(file, `${JSON.stringify(mine)}\n`)
      break
    }
    if (owner && isAlive(owner)) throw new PgliteDirLockedError(dataDir, owner)
    // Left by a process that is gone (killed, crashed): take it over.
    unlinkIfOwnedBy(file, owner)
  }
  if (!held.size) process.once('exit', () => held.forEach((owner, path) => unlinkIfOwnedBy(path, owner)))
  held.set(file, mine)
}

/** The lock's owner; undefined when there is no lock file (any more). */
function readOwner(file: string): LockOwner | undefined {
  const text = readTextIfExists(file)
  if (text === undefined) return undefined
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>
    if (typeof owner.pid === 'number' && typeof owner.hostname === 'string') {
      return { pid: owner.pid, hostname: owner.hostname, command: String(owner.command ?? 'unknown'), since: String(owner.since ?? 'unknown') }
    }
  }
  catch {
    // Not JSON: answered below like any other lock this code cannot read.
  }
  // Not a lock this code wrote, or half-written by a process starting right now: it counts as held.
  return { pid: -1, hostname: hostname(), command: 'an unreadable lock file', since: 'unknown' }
}

/** Another machine's process cannot be checked: its lock counts as held. */
function isAlive(owner: LockOwner): boolean {
  if (owner.pid < 0 || owner.hostname !== hostname()) return true
  try {
    process.kill(owner.pid, 0)
    return true
  }
  catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function unlinkIfOwnedBy(file: string, owner: LockOwner | undefined): void {
  const current = readOwner(file)
  if (current?.pid !== owner?.pid || current?.since !== owner?.since) return
  try {
    unlinkSync(file)
  }
  catch {
    // Already gone: nothing left to release.
  }
}
