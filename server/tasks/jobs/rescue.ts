import { useConfig } from '../../config'
import { databaseReady } from '../../db'
import { rescueStaleJobs } from '../../jobs/maintenance'
import { useLocks } from '../../locks'

export default defineTask({
  meta: { name: 'jobs:rescue', description: 'Put back or dead-letter running jobs whose worker stopped heart-beating' },
  async run() {
    const { db } = await databaseReady()
    return { result: await rescueStaleJobs(db, useLocks(), useConfig().JOB_HEARTBEAT_TIMEOUT_MS) }
  },
})
