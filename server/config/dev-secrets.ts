import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

/** How a kept secret is made and checked (the configuration's own generator and validation). */
export interface SecretMaker {
  generate: (name: string) => string
  valid: (name: string, value: string) => boolean
}

/**
 * Generated local secrets (`nuxt dev`, embedded) kept in one JSON file, readable by its owner only,
 * so a restart keeps the OPS_TOKEN, the webhook secrets and the session cookies that were handed
 * out. Each name missing from the file, or invalid there, is generated and added; the rest is
 * reused as it is.
 */
export function keptSecrets(file: string, names: readonly string[], maker: SecretMaker): Record<string, string> {
  for (let attempt = 0; ; attempt++) {
    const stored = readStored(file)
    const values: Record<string, string> = {}
    let added = false
    for (const name of names) {
      const value = stored?.[name]
      if (typeof value === 'string' && maker.valid(name, value)) {
        values[name] = value
      }
      else {
        values[name] = maker.generate(name)
        added = true
      }
    }
    if (!added) return values
    const contents = `${JSON.stringify({ ...stored, ...values }, null, 2)}\n`
    mkdirSync(dirname(file), { recursive: true })
    if (stored) {
      // Replaced whole, never half-written: another process may be reading it.
      const next = `${file}.${process.pid}.tmp`
      writeFileSync(next, contents, { mode: 0o600 })
      renameSync(next, file)
      return values
    }
    try {
      // Exclusive: two processes starting at once must not each keep secrets of their own.
      writeFileSync(file, contents, { mode: 0o600, flag: 'wx' })
      return values
    }
    catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw error
    }
  }
}

/** The file's secrets; undefined when there is no file yet. */
function readStored(file: string): Record<string, unknown> | undefined {
  const text = readTextIfExists(file)
  if (text === undefined) return undefined
  try {
    const parsed: unknown = JSON.parse(text)
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>
  }
  catch {
    // Not JSON: refused below with what to do.
  }
  throw new Error(`${file} is not a JSON object of secrets. Delete it to generate new development secrets (clients holding the old ones must be given the new).`)
}

/** The file's text; undefined when it does not exist (any other failure is thrown). */
function readTextIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8')
  }
  catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}
