import { setTimeout as sleep } from 'node:timers/promises'

export interface PacerOptions {
  /** The fallback poll: with no wake-up, the loop claims again after this long. */
  pollIntervalMs: number
  /**
   * After a claim that found the queue drained, a wake-up (a new order, a NOTIFY) claims no sooner
   * than this after it: under a stream of orders, one claim takes the jobs of several instead of one
   * each, and their loads, locks and completions go out together. What that saves and what it costs
   * in latency: docs/architecture.md#the-worker.
   */
  claimCoalesceMs: number
}

/**
 * When the claim loop claims next: once woken (jobs arrived; a slot freed while more may be due)
 * or once the poll interval passed.
 */
export function createPacer({ pollIntervalMs, claimCoalesceMs }: PacerOptions) {
  let wakeUp: (() => void) | undefined
  // A wake-up that arrives while the loop is claiming is kept for its next wait, not lost.
  let wokenWhileBusy = false
  // The last claim found fewer due jobs than it asked for: a freed slot alone is no reason to ask again.
  let queueDrained = false
  let lastClaimAt = 0

  function wake(): void {
    if (wakeUp) wakeUp()
    else wokenWhileBusy = true
  }

  /** True when woken, false when the poll interval passed. */
  function waitForWake(ms: number): Promise<boolean> {
    if (wokenWhileBusy) {
      wokenWhileBusy = false
      return Promise.resolve(true)
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(false), ms)
      function done(woken: boolean) {
        clearTimeout(timer)
        wakeUp = undefined
        resolve(woken)
      }
      wakeUp = () => done(true)
    })
  }

  return {
    wake,
    /** New jobs may be due: enqueued here or elsewhere (NOTIFY), or by a job of this worker. */
    jobsArrived(): void {
      queueDrained = false
      wake()
    },
    /**
     * A slot was freed. Jobs a commit enqueued (webhook.apply enqueues the order's effects) woke this
     * worker through the transaction's after-commit hook already.
     */
    slotFreed(): void {
      if (!queueDrained) wake()
    },
    claiming(): void {
      lastClaimAt = performance.now()
    },
    /** Fewer than asked for: the queue is drained. */
    claimed(full: boolean): void {
      queueDrained = !full
    },
    async idle(): Promise<void> {
      const drained = queueDrained
      const woken = await waitForWake(pollIntervalMs)
      if (!woken) queueDrained = false
      else if (drained) {
        const sinceClaim = performance.now() - lastClaimAt
        if (sinceClaim < claimCoalesceMs) await sleep(claimCoalesceMs - sinceClaim)
      }
    },
  }
}
