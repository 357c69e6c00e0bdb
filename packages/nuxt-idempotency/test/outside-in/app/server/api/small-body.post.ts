/** Bodies up to 256 bytes; a larger one is refused (413) before anything runs or is stored. */
export default defineIdempotentEventHandler({
  maxBodyBytes: 256,
  async handler(event, { idempotencyKey }) {
    const body = await readBody(event)
    recordExecution('small-body', idempotencyKey, body)
    return { accepted: true }
  },
})
