import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

/**
 * Each entry's names, pinned: a name that appears or disappears fails here until this list and
 * README.md (one line each) say so. Runtime names come from the built dist, all names from the
 * emitted declarations.
 */

const packageDir = fileURLToPath(new URL('..', import.meta.url))
const read = (path: string) => readFileSync(join(packageDir, path), 'utf8')
const readme = read('README.md')

/** Every name a .d.ts exports: `export { a, type B } from`, `export type { C } from`, `export declare …`. */
function declaredNames(dts: string): string[] {
  const names = new Set<string>()
  for (const [, list] of dts.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)) {
    for (const item of list!.split(',')) {
      const name = item.trim().replace(/^type\s+/, '').split(/\s+as\s+/).pop()!.trim()
      if (name) names.add(name)
    }
  }
  for (const [, name] of dts.matchAll(/export\s+(?:declare\s+)?(?:abstract\s+)?(?:class|function|const|let|interface|type|enum)\s+([A-Za-z_$][\w$]*)/g)) names.add(name!)
  return [...names].sort()
}

const entries = {
  '@idempotent-checkout/db-kit': {
    runtime: [
      'DatabaseUrlError', 'IDLE_IN_TRANSACTION_TIMEOUT_MS', 'LOCK_TIMEOUT_MS', 'MIGRATION_LOCK_ID', 'PGLITE_LOCK_FILE', 'PgliteDirLockedError', 'RETENTION_LOCK_TTL_MS',
      'RETENTION_PACE', 'TransactionPoolerError', 'afterCommit', 'dataRefusalCode', 'defineStatement', 'deleteInPacedBatches', 'deletePickedRows', 'describeDatabaseError',
      'isDatabaseUnavailable', 'isLockTimeout', 'mapRow', 'openDatabase', 'pickedOnce', 'queryAllPrepared', 'queryPrepared', 'shiftParams', 'transaction',
      'violatedConstraint', 'violatedUniqueConstraint', 'writeAtCommit',
    ],
    types: ['AfterCommitHook', 'BatchDelete', 'BoundStatement', 'Database', 'DatabaseHandle', 'DeferrableQuery', 'MigrationSource', 'OpenDatabaseOptions', 'PacedDeleteOptions', 'PacedDeleteRun', 'PoolMode', 'TransactOptions'],
    js: 'dist/index.js',
    dts: 'dist/index.d.ts',
  },
  '@idempotent-checkout/db-kit/expiring-map': {
    runtime: ['ExpiringMap'],
    types: [],
    js: 'dist/expiring-map.js',
    dts: 'dist/expiring-map.d.ts',
  },
} as const

describe.each(Object.keys(entries) as Array<keyof typeof entries>)('%s', (entry) => {
  const pinned = entries[entry]

  it('exports exactly the pinned runtime names', async () => {
    expect(Object.keys(await import(join(packageDir, pinned.js))).sort()).toEqual([...pinned.runtime].sort())
  })

  it('declares exactly the pinned names', () => {
    expect(declaredNames(read(pinned.dts))).toEqual([...pinned.runtime, ...pinned.types].sort())
  })

  it('documents every name in README.md', () => {
    expect([...pinned.runtime, ...pinned.types].filter(name => !new RegExp(`\`${name}\\b`).test(readme))).toEqual([])
  })
})

describe('the published tarball (npm pack --dry-run)', () => {
  it('holds the build, README, LICENSE and CHANGELOG only, and no machine path in any file', async () => {
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: packageDir, timeout: 120_000 })
    const paths = (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map(file => file.path)
    expect(paths).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts', 'dist/expiring-map.js']))
    expect(paths.filter(path => !/^(dist\/[\w.-]+\.(js|d\.ts)|package\.json|README\.md|LICENSE|CHANGELOG\.md)$/.test(path))).toEqual([])
    expect(paths.filter(path => /\/(work|tmp|root)\//.test(readFileSync(join(packageDir, path), 'latin1')))).toEqual([])
  }, 120_000)
})
