/** Answers `size` characters of padding; a stored form over 1024 bytes is answered but not remembered. */
export default defineIdempotentEventHandler({
  maxResponseBytes: 1024,
  async handler(event, { idempotencyKey }) {
    const body = await readBody<{ size?: number }>(event)
    recordExecution('large-response', idempotencyKey, body)
    return { padding: 'x'.repeat(body?.size ?? 0) }
  },
})
