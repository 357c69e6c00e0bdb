import { defineConfig } from 'vitest/config'

// Three projects: pure units, contract suites against real services and PGlite, and HTTP suites
// against the built server (built once by the e2e global setup, then started as real processes).
// A fourth, the multi-instance chaos run, takes minutes: it runs only when asked for by name
// (`npm run test:chaos`, i.e. `--project chaos`, which replaces the default selection below).
export default defineConfig({
  test: {
    project: ['unit', 'integration', 'e2e'],
    projects: [
      { test: { name: 'unit', include: ['tests/unit/**/*.test.ts'], environment: 'node' } },
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
    ],
  },
})
