import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/**
 * docs/extending.md shows code only by quoting its fixtures: every fenced block follows a line
 * `<!-- fixture: <path> -->` and appears verbatim in that file (once the indentation of the list
 * item it sits in is taken off), so a change to either shows here. Every fixture is quoted. (That
 * every path the page names exists is docs-paths.test.ts's to check, as for every doc.)
 */

const root = fileURLToPath(new URL('../../', import.meta.url))
const pagePath = 'docs/extending.md'
const page = readFileSync(join(root, pagePath), 'utf8')
const fixtureDir = 'tests/fixtures/extending'

interface Block {
  line: number
  /** The fixture the line above names; undefined when there is no marker. */
  fixture?: string
  code: string
}

const lineOf = (index: number) => page.slice(0, index).split('\n').length

// A fence, its body, and its closing fence at the same indentation.
const blocks: Block[] = [...page.matchAll(/^( *)```[^\n]*\n([\s\S]*?)^\1```$/gm)].map((match) => {
  const [, indent = '', body = ''] = match
  const above = page.slice(0, match.index).trimEnd().split('\n').at(-1) ?? ''
  const code = body.split('\n').map(line => line.startsWith(indent) ? line.slice(indent.length) : line).join('\n').trimEnd()
  return { line: lineOf(match.index), fixture: /^\s*<!-- fixture: (\S+) -->$/.exec(above)?.[1], code }
})

describe('docs/extending.md', () => {
  it('quotes each code block from the fixture named above it, verbatim', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4)
    const wrong = blocks.flatMap(({ line, fixture, code }) => {
      if (!fixture) return [`line ${line}: no <!-- fixture: … --> line above the block`]
      if (!existsSync(join(root, fixture))) return [`line ${line}: ${fixture} does not exist`]
      return readFileSync(join(root, fixture), 'utf8').includes(code) ? [] : [`line ${line}: not found verbatim in ${fixture}`]
    })
    expect(wrong).toEqual([])
  })

  it('quotes every fixture', () => {
    const quoted = new Set(blocks.map(block => block.fixture))
    const fixtures = readdirSync(join(root, fixtureDir)).map(name => `${fixtureDir}/${name}`)
    expect(fixtures.filter(fixture => !quoted.has(fixture))).toEqual([])
  })
})
