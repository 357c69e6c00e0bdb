import { useConfig } from '../../config'
import { databaseReady } from '../../db'
import { deleteExpiredRecords } from '../../jobs/maintenance'
import { useLocks } from '../../locks'

export default defineTask({
  meta: { name: 'retention:cleanup', description: 'Delete expired idempotency records and old completed jobs, in batches' },
  async run() {
    const { db } = await databaseReady()
    return { result: await deleteExpiredRecords(db, useLocks(), useConfig().JOB_RETENTION_DAYS) }
  },
})
