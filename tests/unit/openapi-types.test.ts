import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, it } from 'vitest'

// tests/support/api-types.ts is committed output of `npm run openapi:types`: the API document as
// `npm run openapi:write` writes it, turned into types by openapi-typescript. Regenerated here the
// same way in a temporary directory, so a change to the document without the types fails.

const run = promisify(execFile)
const projectRoot = fileURLToPath(new URL('../..', import.meta.url))
const committedTypes = join(projectRoot, 'tests/support/api-types.ts')
const openapiTypescriptCli = join(projectRoot, 'node_modules/openapi-typescript/bin/cli.js')

let workDir: string

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'openapi-types-'))
})

afterAll(async () => {
  await rm(workDir, { recursive: true, force: true })
})

it('tests/support/api-types.ts is what openapi-typescript makes of the current document (npm run openapi:types)', async () => {
  const document = join(workDir, 'openapi.json')
  await run('npm', ['run', '--silent', 'openapi:write', '--', document], { cwd: projectRoot })
  const { stdout: generated } = await run(process.execPath, [openapiTypescriptCli, document], { cwd: projectRoot, maxBuffer: 64 * 1024 * 1024 })

  const committed = await readFile(committedTypes, 'utf8')
  // The header line says how the file was made; the rest is openapi-typescript's output verbatim.
  const [header, ...types] = committed.split('\n')
  expect(header).toContain('npm run openapi:types')
  expect(types.join('\n'), 'the document changed: run `npm run openapi:types` and commit tests/support/api-types.ts').toBe(generated)
}, 60_000)
