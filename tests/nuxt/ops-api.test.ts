import { registerEndpoint } from '@nuxt/test-utils/runtime'
import { defineEventHandler, getHeader, setResponseHeader, setResponseStatus } from 'h3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { describeError, OpsRequestError, useOps } from '~/composables/useOps'

// The console's one way to call the server: Nuxt's $fetch with the operator token, problems
// turned into OpsRequestError, and a refused token forgotten with the reason.

const problem = (status: number, detail: string) => defineEventHandler((event) => {
  setResponseStatus(event, status)
  setResponseHeader(event, 'content-type', 'application/problem+json')
  return { type: 'about:blank', title: 'Refused', status, detail }
})

describe('useOps().api', () => {
  const stops: Array<() => void> = []
  beforeEach(() => sessionStorage.clear())
  afterEach(() => stops.splice(0).forEach(stop => stop()))

  it('sends the kept token as a bearer header and answers the parsed JSON', async () => {
    const seen: Array<string | undefined> = []
    stops.push(registerEndpoint('/api/ops/mailbox', defineEventHandler((event) => {
      seen.push(getHeader(event, 'authorization'))
      return { object: 'list', data: [] }
    })))
    sessionStorage.setItem('ops:token', 'tok_kept')
    const ops = useOps()
    ops.restore()

    const answer = await ops.api('/api/ops/mailbox', { query: { limit: 5 } })
    expect(answer).toEqual({ object: 'list', data: [] })
    expect(seen).toEqual(['Bearer tok_kept'])
  })

  it('a problem answer throws OpsRequestError with its status and detail, and the token stays', async () => {
    stops.push(registerEndpoint('/api/ops/jobs', problem(400, 'status must be one of queued, running… Fix the filter and try again.')))
    sessionStorage.setItem('ops:token', 'tok_kept')
    const ops = useOps()
    ops.restore()

    const error = await ops.api('/api/ops/jobs').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(OpsRequestError)
    expect((error as OpsRequestError).status).toBe(400)
    expect((error as OpsRequestError).problem?.detail).toBe('status must be one of queued, running… Fix the filter and try again.')
    expect(describeError(error)).toBe('status must be one of queued, running… Fix the filter and try again. (HTTP 400)')
    expect(ops.token.value).toBe('tok_kept')
  })

  it('a 401 to the kept token forgets it and says why; a refused candidate token forgets nothing', async () => {
    stops.push(registerEndpoint('/api/ops/jobs', problem(401, 'Send Authorization: Bearer <OPS_TOKEN>.')))
    sessionStorage.setItem('ops:token', 'tok_rotated')
    const ops = useOps()
    ops.restore()

    expect(await ops.signIn('tok_wrong')).toBe('That token was refused (401 Unauthorized). Check the server\'s OPS_TOKEN and try again.')
    expect(ops.token.value).toBe('tok_rotated')

    await expect(ops.api('/api/ops/jobs')).rejects.toBeInstanceOf(OpsRequestError)
    expect(ops.token.value).toBeUndefined()
    expect(sessionStorage.getItem('ops:token')).toBeNull()
    expect(ops.authError.value).toBe('The server refused the operator token (401 Unauthorized): Send Authorization: Bearer <OPS_TOKEN>. Enter the token again.')
  })
})
