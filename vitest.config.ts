import { fileURLToPath } from 'node:url'
import { defineVitestProject } from '@nuxt/test-utils/config'
import { defineConfig } from 'vitest/config'
import type { TestUserConfig } from 'vitest/node'

// Four projects: pure units, contract suites against real services and PGlite, HTTP suites
// against the built server (built once by the e2e global setup, then started as real processes),
// and components mounted in the Nuxt environment (happy-dom).
// A fifth, the multi-instance chaos run, takes minutes: it runs only when asked for by name
// (`npm run test:chaos`, i.e. `--project chaos`, which replaces the default selection below).

/**
 * The Nuxt environment loads the app's Nuxt config and generates its own build directory, apart
 * from the project's `.nuxt` (which typecheck reads) and the e2e build: under APP_BUILD_ROOT when
 * set, so parallel runs do not share it.
 */
const nuxtTestBuildDir = process.env.APP_BUILD_ROOT
  ? `${process.env.APP_BUILD_ROOT}/.nuxt-test`
  : fileURLToPath(new URL('./node_modules/.cache/nuxt-test', import.meta.url))

/** `--project` names given on the command line (globs allowed; a negated one may select anything). */
const projectFilters = process.argv.flatMap((arg, index, args) => arg === '--project' ? [args[index + 1] ?? ''] : arg.startsWith('--project=') ? [arg.slice('--project='.length)] : [])
const selects = (name: string) => !projectFilters.length
  || projectFilters.some(filter => filter.startsWith('!') || new RegExp(`^${filter.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`).test(name))

// `project` (the default selection) is one of vitest's run options, which its config accepts too.
const test: TestUserConfig = {
  project: ['unit', 'integration', 'e2e', 'nuxt', 'module'],
  projects: [
    { test: { name: 'unit', include: ['tests/unit/**/*.test.ts', 'packages/db-kit/test/**/*.test.ts'], environment: 'node' } },
    {
      test: {
        name: 'integration',
        include: ['tests/integration/**/*.test.ts'],
        environment: 'node',
        testTimeout: 30_000,
        hookTimeout: 60_000,
      },
    },
    {
      test: {
        name: 'e2e',
        include: ['tests/e2e/**/*.test.ts'],
        environment: 'node',
        globalSetup: ['tests/support/build-once.ts'],
        // Each file starts its own server processes: run files one at a time on two cores.
        fileParallelism: false,
        testTimeout: 60_000,
        hookTimeout: 120_000,
      },
    },
    {
      test: {
        name: 'chaos',
        include: ['tests/chaos/**/*.test.ts'],
        environment: 'node',
        globalSetup: ['tests/support/build-once.ts'],
        testTimeout: 10_000,
        // The whole run (setup, load, faults, settling, checks) is one beforeAll.
        hookTimeout: 600_000,
      },
    },
    {
      // nuxt-idempotency's own suites: fixture apps built with @nuxt/test-utils, and the package
      // installed from its tarball into a fresh app.
      test: {
        name: 'module',
        include: ['packages/nuxt-idempotency/test/**/*.test.ts'],
        environment: 'node',
        fileParallelism: false,
        testTimeout: 60_000,
        hookTimeout: 900_000,
      },
    },
    // Loading Nuxt takes seconds of CPU: only when this project is selected.
    ...(selects('nuxt')
      ? [defineVitestProject({
          test: {
            name: 'nuxt',
            include: ['tests/nuxt/**/*.test.ts'],
            environment: 'nuxt',
            environmentOptions: { nuxt: { domEnvironment: 'happy-dom', overrides: { buildDir: nuxtTestBuildDir } } },
          },
        })]
      : []),
  ],
}

export default defineConfig({ test })
