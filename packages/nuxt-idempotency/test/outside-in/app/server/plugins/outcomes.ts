import { appendFileSync } from 'node:fs'

// Each idempotency outcome as a line in OUTCOMES_FILE: what a metrics hook of the app would see.
export default defineNitroPlugin((nitroApp) => {
  const file = process.env.OUTCOMES_FILE
  if (!file) return
  nitroApp.hooks.hook('idempotency:outcome', ({ route, key, outcome }) => {
    appendFileSync(file, `${JSON.stringify({ route, key, outcome })}\n`)
  })
})
