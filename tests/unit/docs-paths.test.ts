import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/**
 * Every repository path a doc names exists. The docs: README.md, docs/*.md and the module's README
 * (packages/nuxt-idempotency/README.md). Fenced code blocks are skipped: the paths in them are an
 * example app's files (`// server/api/subscriptions.post.ts`). What counts as a path:
 *
 * - a relative link or image target, `[text](target)`: resolved against the doc's own folder, its
 *   `#fragment` and `?query` dropped. A target with a scheme (`https:`, `mailto:`), a fragment of the
 *   same page (`#…`) or a site path (`/docs`) is not a file.
 * - an inline code span whose whole text is a path — letters, digits and `._-@+[]` between `/`s, so
 *   no space, `*`, `{`, `<`, `:`, `=` or `…`: globs, placeholders, URLs, commands and env lines are not
 *   paths — whose first segment is a top-level entry of the repository (as `git ls-files` lists them:
 *   `server`, `tests`, `docs`, `.ci`, `package.json`, …), resolved against the repository root. API
 *   paths (`/api/orders/:id`), variables, npm scripts and ignored output (`.output/`, `.data/`) start
 *   with none of them. In the module's README, which ships alone, a span may also start with one of
 *   the package's own top-level entries (`src/`, `test/`, `playground/`): resolved against the package.
 */

const root = fileURLToPath(new URL('../../', import.meta.url))
const modulePackage = 'packages/nuxt-idempotency'
const moduleReadme = `${modulePackage}/README.md`

const trackedFiles = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean)
const topLevel = new Set(trackedFiles.map(file => file.split('/')[0]!))
const moduleTopLevel = new Set(trackedFiles.filter(file => file.startsWith(`${modulePackage}/`)).map(file => file.split('/')[2]!))

const docs = ['README.md', ...readdirSync(join(root, 'docs')).filter(name => name.endsWith('.md')).sort().map(name => `docs/${name}`), moduleReadme]

/**
 * Paths a doc names on purpose as where something used to be (docs/idempotency-module.md's migration
 * table, "before"). Each must be gone: the list can never hide a path that exists.
 */
const formerPaths: Record<string, string[]> = {
  'docs/idempotency-module.md': [
    'server/idempotency/core.ts', 'server/idempotency/handler', 'server/idempotency/handler.ts',
    'server/cache/expiring-map.ts', 'server/db/client.ts', 'server/locks/memory.ts',
  ],
}

const PATH_SPAN = /^[\w.@+-]+(?:\/[\w.@+[\]-]+)*\/?$/

interface NamedPath {
  doc: string
  /** As the doc writes it. */
  named: string
  /** Relative to the repository root. */
  path: string
}

/** The paths one doc names, by the rules above. */
function pathsNamedIn(doc: string): NamedPath[] {
  const text = readFileSync(join(root, doc), 'utf8').replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, '')
  const found: NamedPath[] = []
  for (const [, target] of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!) || target!.startsWith('#') || target!.startsWith('/')) continue
    const file = decodeURIComponent(target!.replace(/[#?].*$/, ''))
    found.push({ doc, named: target!, path: relative(root, join(root, dirname(doc), file)) })
  }
  for (const [, span] of text.matchAll(/`([^`\n]+)`/g)) {
    if (!PATH_SPAN.test(span!)) continue
    const first = span!.split('/')[0]!
    if (!span!.includes('/') && !topLevel.has(span!)) continue
    if (topLevel.has(first)) found.push({ doc, named: span!, path: span! })
    else if (doc === moduleReadme && moduleTopLevel.has(first)) found.push({ doc, named: span!, path: `${modulePackage}/${span}` })
  }
  return found
}

const named = docs.flatMap(pathsNamedIn)

describe('paths named in the docs', () => {
  it('finds the paths the docs name (the rules above still match them)', () => {
    expect(docs).toContain('docs/architecture.md')
    expect(named.length).toBeGreaterThan(200)
    expect(named.map(entry => entry.path)).toEqual(expect.arrayContaining(['server/jobs/worker/index.ts', 'tests/e2e/', 'docs/operations.md', 'docs/screenshots/cart-filled.png']))
  })

  it('names only paths that exist', () => {
    const missing = named
      .filter(entry => !(formerPaths[entry.doc] ?? []).includes(entry.named))
      .filter(entry => !existsSync(join(root, entry.path)))
      .map(entry => `${entry.doc}: ${entry.named}${entry.named === entry.path ? '' : ` (${entry.path})`}`)
    expect(missing, `paths named in the docs that do not exist:\n${[...new Set(missing)].join('\n')}`).toEqual([])
  })

  it('lists as former paths only paths that are gone and that their doc names', () => {
    const wrong = Object.entries(formerPaths).flatMap(([doc, paths]) => paths
      .filter(path => existsSync(join(root, path)) || !named.some(entry => entry.doc === doc && entry.named === path))
      .map(path => `${doc}: ${path}`))
    expect(wrong, 'former paths that exist, or that their doc no longer names').toEqual([])
  })
})
