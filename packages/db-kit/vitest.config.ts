import { defineConfig } from 'vitest/config'

// db-kit's own suites (`npm test -w @idempotent-checkout/db-kit`); the repository's `unit` project runs them too.
export default defineConfig({
  test: { name: 'db-kit', include: ['test/**/*.test.ts'], environment: 'node' },
})
