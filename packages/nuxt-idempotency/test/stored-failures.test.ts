import { createError } from 'h3'
import { FetchError } from 'ofetch'
import { describe, expect, it } from 'vitest'
import { httpClientError } from '../src/runtime/core/run'

// Which thrown errors the layer stores as the key's answer (then replays): the handler's own 4xx
// only. Anything else — an outside API's error, a 5xx, a plain Error — leaves the key free for a retry.
describe('httpClientError: the thrown errors that are stored', () => {
  it('stores a 4xx the handler threw with createError: its data as the body', () => {
    expect(httpClientError(createError({ statusCode: 409, statusMessage: 'Plan taken', data: { plan: 'pro' } })))
      .toEqual({ status: 409, body: { plan: 'pro' }, name: 'Plan taken' })
    expect(httpClientError(createError({ statusCode: 403 }))).toEqual({ status: 403, body: { statusCode: 403 }, name: 'http_403' })
  })

  it('stores a problem (data.problem) as application/problem+json, named by its slug', () => {
    const problem = { type: '/problems/cart-already-ordered', title: 'Cart already ordered', status: 409, detail: 'Ordered before' }
    expect(httpClientError(createError({ statusCode: 409, data: { problem } })))
      .toEqual({ status: 409, body: problem, headers: { 'Content-Type': 'application/problem+json' }, name: 'cart-already-ordered' })
  })

  it('does not store an outside API\'s 4xx ($fetch\'s FetchError), nor anything that is no h3 error', () => {
    const fromOutside = new FetchError('[POST] "https://api.example.com/charges": 429 Too Many Requests')
    Object.assign(fromOutside, { statusCode: 429, status: 429, data: { error: 'rate_limited' } })
    expect(httpClientError(fromOutside)).toBeUndefined()
    expect(httpClientError(Object.assign(new Error('looks like HTTP'), { statusCode: 404 }))).toBeUndefined()
    expect(httpClientError(new Error('boom'))).toBeUndefined()
    expect(httpClientError(null)).toBeUndefined()
  })
})
