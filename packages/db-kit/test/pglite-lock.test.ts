import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openDatabase, PGLITE_LOCK_FILE, PgliteDirLockedError } from '../src'
import { holdPgliteDir } from '../src/pglite-lock'

const jitiCli = fileURLToPath(new URL('../../../node_modules/jiti/lib/jiti-cli.mjs', import.meta.url))
const lockModule = fileURLToPath(new URL('../src/pglite-lock.ts', import.meta.url))

let dir: string
const children: ChildProcess[] = []
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'pglite-lock-'))
})
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

const lockFile = () => join(dir, PGLITE_LOCK_FILE)
const owner = () => JSON.parse(readFileSync(lockFile(), 'utf8')) as { pid: number, hostname: string, since: string }
const exitOf = (child: ChildProcess) => new Promise<number | null>(resolve => child.once('exit', code => resolve(code)))

/** Another process holding the directory through holdPgliteDir, until its stdin closes. */
async function holdingProcess(): Promise<ChildProcess> {
  const script = join(dir, 'hold.ts')
  writeFileSync(script, `import { holdPgliteDir } from ${JSON.stringify(lockModule)}\n`
  + `holdPgliteDir(${JSON.stringify(dir)})\nprocess.stdout.write('held\\n')\nprocess.stdin.resume().on('end', () => process.exit(0))\n`)
  const child = spawn(process.execPath, [jitiCli, script], { stdio: ['pipe', 'pipe', 'inherit'] })
  children.push(child)
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => { if (chunk.toString().includes('held')) resolve() })
    child.once('exit', code => reject(new Error(`the holding process exited with ${code}`)))
  })
  return child
}

describe('holdPgliteDir', () => {
  it('writes a lock naming this process, and holding it again in the same process is allowed', () => {
    holdPgliteDir(dir)
    expect(owner()).toMatchObject({ pid: process.pid, hostname: hostname() })
    expect(() => holdPgliteDir(dir)).not.toThrow()
    expect(owner().pid).toBe(process.pid)
  })

  it('refuses while another live process holds it, naming the process and what to do', async () => {
    const holder = await holdingProcess()
    let refused: unknown
    try {
      holdPgliteDir(dir)
    }
    catch (error) {
      refused = error
    }
    expect(refused).toBeInstanceOf(PgliteDirLockedError)
    const message = (refused as Error).message
    expect(message).toContain(`The embedded database in ${dir} is in use by process ${holder.pid} (`)
    expect(message).toContain('PGlite allows one process at a time. Stop that process first')
    expect(message).toContain(`If no such process runs, delete ${lockFile()}.`)
    expect(owner().pid).toBe(holder.pid)
  })

  it('the holder removes its lock when it exits, and the directory can be held again', async () => {
    const holder = await holdingProcess()
    holder.stdin!.end()
    expect(await exitOf(holder)).toBe(0)
    expect(existsSync(lockFile())).toBe(false)
    holdPgliteDir(dir)
    expect(owner().pid).toBe(process.pid)
  })

  it('takes over a lock left by a process that is gone (killed before it could remove it)', async () => {
    const holder = await holdingProcess()
    holder.kill('SIGKILL')
    await exitOf(holder)
    expect(owner().pid).toBe(holder.pid)
    holdPgliteDir(dir)
    expect(owner().pid).toBe(process.pid)
  })

  it('openDatabase refuses an embedded directory another process holds, before PGlite opens it', async () => {
    const holder = await holdingProcess()
    await expect(openDatabase({ pgliteDir: dir, migrations: [] })).rejects.toThrow(`is in use by process ${holder.pid}`)
    expect(existsSync(join(dir, 'PG_VERSION'))).toBe(false)
  })
})
