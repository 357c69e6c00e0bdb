import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

// The README's table of the IETF Idempotency-Key draft names, per row, the test that holds the
// server to it: each named file must exist and each quoted test name must be in that file.

const projectRoot = new URL('../../', import.meta.url)
const readme = readFileSync(new URL('README.md', projectRoot), 'utf8')
const section = readme.slice(readme.indexOf('## The IETF `Idempotency-Key` draft'))
const table = section.slice(0, section.indexOf('\n## ')).split('\n').filter(line => /^\| \d/.test(line))

/** A row's test cell: `tests/…test.ts` paths, each optionally followed by a quoted test name. */
function namedTests(cell: string): Array<{ file: string, name?: string }> {
  return [...cell.matchAll(/`(tests\/[^`]+\.test\.ts)`(?:\s+"([^"]+)")?/g)].map(([, file, name]) => ({ file: file!, name }))
}

describe('the README\'s IETF draft table', () => {
  it('has a row for each MUST and SHOULD, each naming at least one test', () => {
    expect(table.length).toBeGreaterThanOrEqual(12)
    for (const row of table) expect(namedTests(row.split('|').at(-2)!), row).not.toHaveLength(0)
  })

  it.each(table.map(row => [row.split('|')[1]!.trim() + ' ' + row.split('|')[2]!.trim(), row] as const))('§%s: names tests that exist', (_, row) => {
    for (const { file, name } of namedTests(row.split('|').at(-2)!)) {
      expect(existsSync(new URL(file, projectRoot)), `${file} exists`).toBe(true)
      if (name) expect(readFileSync(new URL(file, projectRoot), 'utf8'), `${file} has a test named "${name}…"`).toContain(name)
    }
  })
})
