// One idempotent route: the same key and body answer the first response again, marked Idempotent-Replayed.
let greeted = 0

export default defineIdempotentEventHandler(async (event, ctx) => {
  const body = await readBody<{ name?: string }>(event)
  greeted += 1
  setResponseStatus(event, 201)
  setResponseHeader(event, 'Location', `/api/greetings/${greeted}`)
  return { greeting: `Hello, ${body?.name ?? 'world'}`, number: greeted, key: ctx.idempotencyKey }
})
