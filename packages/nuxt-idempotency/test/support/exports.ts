import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'

/**
 * What a package shows its users: the names each entry's emitted declarations export (types and
 * values alike), and what `npm pack` would put in its tarball.
 */

/** Every name a .d.ts exports: `export { a, type B } from`, `export type { C }`, `export declare …`, `export interface …`. */
export function declaredNames(dts: string): string[] {
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

/** The values an ES module's text exports through `export { … } from` lists (for an entry that cannot be imported outside Nitro). */
export function exportedValueNames(js: string): string[] {
  return declaredNames(js)
}

export interface PackedFile {
  path: string
}

/** `npm pack --dry-run --json` of the workspace package in `dir`: the files it would publish. */
export async function packedFiles(dir: string): Promise<PackedFile[]> {
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: dir, timeout: 120_000, maxBuffer: 64 * 1024 * 1024 })
  const [packed] = JSON.parse(stdout) as Array<{ files: PackedFile[] }>
  return packed!.files
}

/** A path of a build machine or a temporary folder, as it would leak into published files. */
export const MACHINE_PATH = /\/(?:work|tmp|root)\//

/** The packed files whose text mentions a machine path, with the first match. */
export function filesWithMachinePaths(dir: string, files: PackedFile[]): string[] {
  return files.flatMap((file) => {
    const found = new RegExp(`.{0,40}${MACHINE_PATH.source}.{0,40}`).exec(readFileSync(join(dir, file.path), 'latin1'))
    return found ? [`${file.path}: ${found[0]}`] : []
  })
}
