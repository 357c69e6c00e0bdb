import { describeKeyContract } from './support/key-contract'
import { missingServices, redisUrl, testDatabase } from './support/services'

// Postgres for the records and Redis for the locks; a fresh database for this run.
const missing = await missingServices()
const database = testDatabase('contract')

describeKeyContract('key contract on Postgres with Redis locks', {
  label: 'postgres',
  env: { DATABASE_URL: database.url, REDIS_URL: redisUrl },
  before: database.create,
  after: database.drop,
  ...(missing.length && { skipBecause: `${missing.join(' and ')} not reachable` }),
})
