import { EventEmitter } from 'node:events'
import type { DatabaseHandle } from '@idempotent-checkout/db-kit'

/**
 * Wakes workers when jobs were committed: at once in this process, and through one NOTIFY per
 * burst for other processes. The NOTIFY is sent after the business transaction committed, never
 * inside it (a NOTIFY in a transaction serialises all commits on the notification queue).
 */

export const JOBS_CHANNEL = 'jobs_ready'
/**
 * At most one NOTIFY (a commit of its own) per this many ms per instance: under load that is one
 * per dozens of orders, and another process's worker still wakes within it.
 */
const NOTIFY_DEBOUNCE_MS = 50

const local = new EventEmitter()
local.setMaxListeners(0)
let pendingNotify: NodeJS.Timeout | undefined

export function wakeWorkers(handle: DatabaseHandle): void {
  local.emit('wake')
  const notifications = handle.notifications
  if (!notifications || pendingNotify) return
  pendingNotify = setTimeout(() => {
    pendingNotify = undefined
    // Best effort: a lost notification only delays pickup until the next poll.
    notifications.notify(JOBS_CHANNEL).catch(() => {})
  }, NOTIFY_DEBOUNCE_MS)
}

export function onLocalWake(listener: () => void): () => void {
  local.on('wake', listener)
  return () => local.off('wake', listener)
}
