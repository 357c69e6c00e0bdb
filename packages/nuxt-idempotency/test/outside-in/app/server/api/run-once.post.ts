import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { IdempotencyInProgressError } from 'nuxt-idempotency/server'

/**
 * A queue consumer's job as a route: runOnce(id, work) runs the work once per id, whichever
 * instance gets it. `fail` throws from the work (nothing stored); `lease` is how long a second
 * caller waits for a running one (then 409).
 */
export default defineEventHandler(async (event) => {
  const body = await readBody<{ id: string, fail?: boolean, workMs?: number, lease?: number }>(event)
  try {
    const result = await runOnce(body.id, async () => {
      recordExecution('run-once', body.id, body)
      await sleep(body.workMs ?? 400)
      if (body.fail) throw new Error('The job failed')
      return { job: body.id, token: randomUUID() }
    }, { scope: 'outside-in-jobs', lease: body.lease ?? 5000 })
    return { result }
  }
  catch (error) {
    if (error instanceof IdempotencyInProgressError) {
      setResponseStatus(event, 409)
      return { inProgress: true }
    }
    throw error
  }
})
