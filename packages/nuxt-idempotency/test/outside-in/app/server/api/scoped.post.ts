/** Keys are the user's (X-User-Id): two users' equal keys never meet. */
export default defineIdempotentEventHandler({
  scope: event => `user:${getHeader(event, 'x-user-id') ?? 'anonymous'}`,
  async handler(event, { idempotencyKey, scope }) {
    const body = await readBody(event)
    recordExecution('scoped', idempotencyKey, { body, user: getHeader(event, 'x-user-id') })
    return { user: getHeader(event, 'x-user-id'), scope }
  },
})
