import { defineConfig } from 'vitest/config'

// The module's own suites, run on their own (`npm test -w nuxt-idempotency`) with the settings of
// the repository's `module` project: fixture apps built with @nuxt/test-utils and started as real
// processes (one file at a time on two cores), and the package installed from its tarball into a fresh app.
export default defineConfig({
  test: {
    name: 'module',
    include: ['test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'test/fixtures/**', 'test/outside-in/**'],
    environment: 'node',
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 900_000,
  },
})
