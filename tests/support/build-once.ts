import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * Global setup of the e2e project: the suites start the built server as real processes, so build it
 * once per run. SKIP_BUILD=1 reuses an existing `.output` for fast local iteration.
 */

const projectRoot = fileURLToPath(new URL('../..', import.meta.url))
/** The built server: `.output` in the project, or under APP_BUILD_ROOT when set (see nuxt.config.ts). */
export const serverEntry = process.env.APP_BUILD_ROOT
  ? resolve(process.env.APP_BUILD_ROOT, '.output/server/index.mjs')
  : fileURLToPath(new URL('../../.output/server/index.mjs', import.meta.url))

/** Variables vitest sets for its own workers; a build seeing them would believe it is a test build. */
const testRunnerVariables = /^(VITEST(_\w+)?|TEST)$/

export default async function buildOnce(): Promise<void> {
  if (process.env.SKIP_BUILD === '1' && existsSync(serverEntry)) {
    console.info('[e2e] SKIP_BUILD=1: reusing .output')
    return
  }
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !testRunnerVariables.test(name)))
  const started = Date.now()
  const { code, output } = await run('npx', ['nuxt', 'build'], { cwd: projectRoot, env: { ...env, NODE_ENV: 'production' } })
  if (code !== 0 || !existsSync(serverEntry)) {
    // The build log is only worth reading when it failed.
    console.error(output)
    throw new Error(`nuxt build failed (exit code ${code}); its output is printed above`)
  }
  console.info(`[e2e] nuxt build done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
}

function run(command: string, args: string[], options: { cwd: string, env: Record<string, string | undefined> }): Promise<{ code: number | null, output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    child.once('error', reject)
    child.once('close', code => resolve({ code, output }))
  })
}
