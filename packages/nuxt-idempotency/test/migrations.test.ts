import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, expect, it } from 'vitest'

// The module's migration is drizzle-kit's output for its table with `IF NOT EXISTS` added (so an app
// whose own migrations made the table keeps it): generated again here from the schema, the two
// must differ by exactly that.
const packageRoot = fileURLToPath(new URL('..', import.meta.url))
const drizzleKit = fileURLToPath(new URL('../../../node_modules/drizzle-kit/bin.cjs', import.meta.url))
const workDir = mkdtempSync(join(tmpdir(), 'nuxt-idempotency-migrations-'))

afterAll(() => rmSync(workDir, { recursive: true, force: true }))

const statements = (sql: string) => sql.split('--> statement-breakpoint').map(part => part.replace(/^--.*$/gm, '').trim()).filter(Boolean)

it('the shipped migration is what drizzle-kit generates from src/runtime/core/schema.ts, with IF NOT EXISTS', async () => {
  const config = join(workDir, 'drizzle.config.mjs')
  writeFileSync(config, `export default ${JSON.stringify({ dialect: 'postgresql', schema: join(packageRoot, 'src/runtime/core/schema.ts'), out: join(workDir, 'out') })}\n`)
  await promisify(execFile)(process.execPath, [drizzleKit, 'generate', '--config', config, '--name', 'records'], { cwd: packageRoot, timeout: 60_000 })
  const generated = readFileSync(join(workDir, 'out', readdirSync(join(workDir, 'out')).find(name => name.endsWith('.sql'))!), 'utf8')
  const shipped = readFileSync(join(packageRoot, 'src/runtime/migrations/0000_records.sql'), 'utf8')
  expect(statements(shipped).map(statement => statement.replace(/ IF NOT EXISTS /g, ' '))).toEqual(statements(generated))
  expect(statements(shipped).every(statement => /^CREATE (TABLE|INDEX) IF NOT EXISTS /.test(statement))).toBe(true)
  expect(readdirSync(join(packageRoot, 'src/runtime/migrations')).filter(name => name.endsWith('.sql'))).toEqual(['0000_records.sql'])
})
