import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describeKeyContract } from './support/key-contract'

// No DATABASE_URL and no REDIS_URL: the module falls back to embedded PGlite and in-process locks.
delete process.env.DATABASE_URL
delete process.env.REDIS_URL

// A fresh PGlite directory for this run: read by the fixture's config at build time and by the server at run time.
const dataRoot = await mkdtemp(join(process.env.APP_BUILD_ROOT ?? tmpdir(), 'nuxt-idempotency-pglite-'))
const pgliteDir = join(dataRoot, 'idempotency')
process.env.IDEMPOTENCY_FIXTURE_PGLITE_DIR = pgliteDir

describeKeyContract('key contract on embedded PGlite with in-process locks', {
  label: 'pglite',
  env: { NUXT_IDEMPOTENCY_PGLITE_DIR: pgliteDir },
  after: () => rm(dataRoot, { recursive: true, force: true }),
})
