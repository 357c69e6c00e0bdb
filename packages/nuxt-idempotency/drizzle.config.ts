import { defineConfig } from 'drizzle-kit'

// The module's own migrations, generated from its one table and shipped with its runtime. They run
// after the app's (see openDatabase) and create only what is absent: an app whose own migrations
// made the table earlier keeps it as it is.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/runtime/core/schema.ts',
  out: './src/runtime/migrations',
})
