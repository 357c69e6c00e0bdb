// Liveness only: answers while the process runs, before and regardless of the database.
export default defineEventHandler(() => ({ status: 'ok' }))
