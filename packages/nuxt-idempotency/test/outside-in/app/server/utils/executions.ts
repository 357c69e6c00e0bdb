import { appendFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * One line per execution of a route's work (the route, its key and body) in EXECUTIONS_FILE,
 * outside any transaction, so a test counts how many times the work really ran across instances.
 */
export function recordExecution(route: string, key: string, body: unknown): void {
  appendFileSync(process.env.EXECUTIONS_FILE!, `${JSON.stringify({ route, key, body })}\n`)
}

/** HANDLER_DELAY_MS keeps a handler in flight for a while, so duplicates sent at once overlap it. */
export const handlerDelay = () => sleep(Number(process.env.HANDLER_DELAY_MS ?? 0))
