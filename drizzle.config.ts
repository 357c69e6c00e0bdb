import { defineConfig } from 'drizzle-kit'

export default defineConfig({
  dialect: 'postgresql',
  schema: './server/db/schema.ts',
  out: './drizzle',
  // nuxt-idempotency's table is its own migrations' (packages/nuxt-idempotency/src/runtime/migrations):
  // the app's never create, alter or drop it. Its indexes only the app uses are in drizzle/0019.
  tablesFilter: ['!idempotency_records'],
})
