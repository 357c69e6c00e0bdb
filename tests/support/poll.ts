import { setTimeout as sleep } from 'node:timers/promises'

/** Re-checks `condition` every `intervalMs` until it holds; throws naming `what` after `timeoutMs`. */
export async function pollUntil(what: string, condition: () => Promise<boolean>, { timeoutMs = 10_000, intervalMs = 50 } = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}`)
    await sleep(intervalMs)
  }
}
