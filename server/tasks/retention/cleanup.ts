import { useConfig } from '../../config'
import { databaseReady } from '../../db'
import { deleteExpiredRecords } from '../../jobs/maintenance'
import { useLocks } from '../../locks'

export default defineTask({
  meta: { name: 'retention:cleanup', description: 'Delete expired idempotency records, old completed jobs and old request-log rows, in paced batches until none is left or the run\'s time budget ends' },
  async run() {
    const { db } = await databaseReady()
    const config = useConfig()
    return { result: await deleteExpiredRecords(db, useLocks(), config.JOB_RETENTION_DAYS, config.REQUEST_LOG_RETENTION_DAYS) }
  },
})
