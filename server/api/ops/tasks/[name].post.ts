import { problem } from '../../../problems'
import type { OpsTaskRun } from '../../../../shared/ops-api'

const runnable = ['jobs:rescue', 'retention:cleanup', 'payments:reconcile']

/** Runs a maintenance task now (they also run on their schedule); safe with many instances. */
export default defineEventHandler(async (event) => {
  const name = getRouterParam(event, 'name') ?? ''
  if (!runnable.includes(name)) throw problem('not-found', `No task "${name}". Tasks: ${runnable.join(', ')}.`)
  return (await runTask(name)) satisfies OpsTaskRun
})
