import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { declaredNames, exportedValueNames, filesWithMachinePaths, packedFiles } from './support/exports'

/**
 * Each entry's names, pinned: a name that appears or disappears is a change of the package's API and
 * fails here until this list (and README.md, which documents every one) says so. Runtime names come
 * from the built dist, type names from the emitted declarations.
 */

const packageDir = fileURLToPath(new URL('..', import.meta.url))
const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')
const readme = read('README.md')

const entries = {
  'nuxt-idempotency': {
    runtime: ['default'],
    declared: ['ModuleOptions'],
    dts: 'dist/types.d.mts',
  },
  'nuxt-idempotency/server': {
    runtime: [
      'IdempotencyInProgressError', 'defineIdempotentEventHandler', 'defineIdempotentWebhookHandler', 'defineWebhookProvider', 'idempotencyReady', 'midtransWebhookProvider',
      'provideIdempotency', 'requireIdempotencyKey', 'runIdempotentRoute', 'runOnce', 'standardWebhooksProvider', 'stripeWebhookProvider', 'useIdempotencyDatabase',
    ],
    declared: [
      'AtomicIdempotentHandlerContext', 'AtomicIdempotentHandlerOptions', 'AtomicWebhookHandlerContext', 'IdempotencyFingerprint', 'IdempotencyOutcome',
      'IdempotencyOutcomeReport', 'IdempotencyRouteRules', 'IdempotencyServices', 'IdempotentHandlerContext', 'IdempotentHandlerOptions', 'IdempotentHandlerSettings',
      'IdempotentReply', 'IdempotentRoute', 'LeasedIdempotentHandlerOptions', 'RunOnceOptions', 'WebhookHandlerContext', 'WebhookHandlerOptions', 'WebhookProviderDefinition',
    ],
    dts: 'dist/runtime/server/index.d.ts',
  },
  'nuxt-idempotency/core': {
    runtime: [
      'IDEMPOTENCY_MIGRATIONS_TABLE', 'LockBackendError', 'STANDARD_SIGNATURE_HEADERS', 'TIMESTAMP_TOLERANCE_SECONDS', 'checkIdempotencyKey', 'checkTimestamp',
      'createIdempotencyStore', 'createMemoryLocks', 'createRedisLocks', 'createReplayCache', 'createResponseCipher', 'fingerprint', 'hmacSha256', 'idempotencyMigrations', 'idempotencyProblem',
      'idempotencyProblems', 'idempotencyRecords', 'idempotencyStatuses', 'midtransNotificationId', 'midtransNotificationIdentity', 'midtransSignature',
      'parseIdempotencyKeyHeader', 'problemError', 'problemOf', 'runIdempotent', 'sameBytes', 'signStandardWebhook', 'standardWebhookHeader', 'verifyMidtransSignature',
      'verifyStandardWebhook', 'verifyStripeSignature',
    ],
    declared: [
      'AtomicOperation', 'AtomicPlan', 'FingerprintInput', 'IdempotencyDeps', 'IdempotencyProblemSlug', 'IdempotencyStatus', 'IdempotencyStore', 'IdempotentOperation',
      'IdempotentOutcome', 'IdempotentRequest', 'IdempotentResult', 'KeyCheck', 'LeasedOperation', 'Locks', 'ProblemBody', 'RedisClient', 'RedisLocksOptions',
      'ReplayCache', 'ReplayCacheOptions', 'ResponseCipher', 'StoredFailure', 'TransactionalOperation', 'Verification', 'WebhookDelivery',
    ],
    dts: 'dist/runtime/core/index.d.ts',
  },
} as const

/** The entry's runtime names: imported, but for the server utils, which import Nitro's `#imports` (read from their module text). */
async function runtimeNames(entry: keyof typeof entries): Promise<string[]> {
  if (entry === 'nuxt-idempotency/server') return exportedValueNames(read('dist/runtime/server/index.js'))
  const module = entry === 'nuxt-idempotency' ? await import('../dist/module.mjs') : await import('../dist/runtime/core/index.js')
  return Object.keys(module).sort()
}

describe.each(Object.keys(entries) as Array<keyof typeof entries>)('%s', (entry) => {
  const pinned = entries[entry]

  it('exports exactly the pinned runtime names', async () => {
    expect(await runtimeNames(entry)).toEqual([...pinned.runtime].sort())
  })

  it('declares exactly the pinned names: the runtime ones and its types', () => {
    expect(declaredNames(read(pinned.dts))).toEqual([...pinned.runtime, ...pinned.declared].sort())
  })

  it('documents every name in README.md', () => {
    const undocumented = [...pinned.runtime, ...pinned.declared].filter(name => name !== 'default' && !new RegExp(`\`${name}\\b`).test(readme))
    expect(undocumented).toEqual([])
  })
})

describe('the published tarball (npm pack --dry-run)', () => {
  it('holds the build, README, LICENSE and CHANGELOG, nothing outside the package, and no machine path in any file', async () => {
    const files = await packedFiles(packageDir)
    const paths = files.map(file => file.path)
    expect(paths).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'dist/module.mjs', 'dist/runtime/migrations/0000_records.sql', 'dist/runtime/migrations/meta/_journal.json']))
    expect(paths.filter(path => path.startsWith('..') || path.startsWith('/') || !/^(dist\/|package\.json$|README\.md$|LICENSE$|CHANGELOG\.md$)/.test(path))).toEqual([])
    expect(filesWithMachinePaths(packageDir, files)).toEqual([])
  }, 120_000)
})
