import { useAppMaintenance } from '../../../composition/app-maintenance'
import { runnableTasks, TaskNameSchema } from '../../../ops/schemas'
import { problem } from '../../../problems'
import type { OpsTaskRun } from '../../../../shared/ops-api'

/** Runs a maintenance service now (they also run on their schedule); safe with many instances. */
export default defineEventHandler(async (event) => {
  const name = getRouterParam(event, 'name') ?? ''
  const task = TaskNameSchema.safeParse(name)
  if (!task.success) throw problem('not-found', `No task "${name}". Tasks: ${runnableTasks.join(', ')}.`)
  const service = useAppMaintenance().find(candidate => candidate.name === task.data)!
  return { result: await service.runOnce() } satisfies OpsTaskRun
})
