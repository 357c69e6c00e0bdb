import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/**
 * shared/ is read by the server and the pages alike. Its modules import one another one way only
 * (statuses ← api-schemas ← orders ← ops-api): a circle, even of type imports, leaves a module
 * half-initialised at runtime depending on which side is loaded first, and ties every change to
 * both ends.
 */

const sharedDir = fileURLToPath(new URL('../../shared/', import.meta.url))
const modules = readdirSync(sharedDir).filter(file => file.endsWith('.ts')).map(file => file.slice(0, -'.ts'.length))

interface SharedImport { from: string, to: string, typeOnly: boolean }

/** Each `import … from './x'` and `export … from './x'` of a shared module, and whether it is erased at runtime. */
function importsOf(module: string): SharedImport[] {
  const source = readFileSync(`${sharedDir}${module}.ts`, 'utf8')
  return [...source.matchAll(/^(import|export)(\s+type)?\b[^;]*?\bfrom\s+'\.\/([\w-]+)'/gms)]
    .map(([, , typeOnly, to]) => ({ from: module, to: to!, typeOnly: typeOnly !== undefined }))
}

const imports = modules.flatMap(importsOf)

/** The modules of a circle through `start`, or undefined. */
function circleFrom(start: string, edges: SharedImport[]): string[] | undefined {
  const walk = (module: string, path: string[]): string[] | undefined => {
    for (const { to } of edges.filter(edge => edge.from === module)) {
      if (to === start) return [...path, to]
      if (!path.includes(to)) {
        const found = walk(to, [...path, to])
        if (found) return found
      }
    }
    return undefined
  }
  return walk(start, [start])
}

describe('shared/ imports', () => {
  it('reads the modules it checks', () => {
    expect(modules).toEqual(expect.arrayContaining(['api-schemas', 'ops-api', 'orders', 'statuses']))
    expect(imports.length).toBeGreaterThan(0)
  })

  it('run in no circle, type imports included', () => {
    expect(modules.map(module => circleFrom(module, imports)?.join(' → ')).filter(Boolean)).toEqual([])
  })

  it('statuses.ts imports no other shared module: every other one reads its enums', () => {
    expect(imports.filter(edge => edge.from === 'statuses')).toEqual([])
  })

  it('api-schemas.ts is imported by orders.ts and ops-api.ts for types only, and itself imports only statuses.ts', () => {
    expect(imports.filter(edge => edge.to === 'api-schemas' && !edge.typeOnly)).toEqual([])
    expect(imports.filter(edge => edge.from === 'api-schemas').map(edge => edge.to)).toEqual(['statuses'])
  })
})
