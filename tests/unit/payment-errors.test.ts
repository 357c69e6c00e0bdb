import midtrans from 'midtrans-client'
import Stripe from 'stripe'
import { describe, expect, it } from 'vitest'
import { classifyMidtransError } from '../../server/payments/midtrans'
import { classifyStripeError } from '../../server/payments/stripe'
import { PaymentRefused, ProviderUnavailable, REFUSED_DETAILS_MESSAGE, retryAfterMs } from '../../server/payments/types'

/**
 * How the providers' errors become the two the job runner acts on: ProviderUnavailable (retried,
 * after Retry-After when given) and PaymentRefused (recorded on the order, never retried). The
 * errors are the official clients' own classes, built as the clients build them from an answer.
 */

function expectRefused(error: Error): PaymentRefused {
  expect(error).toBeInstanceOf(PaymentRefused)
  return error as PaymentRefused
}

function expectUnavailable(error: Error): ProviderUnavailable {
  expect(error).toBeInstanceOf(ProviderUnavailable)
  return error as ProviderUnavailable
}

describe('retryAfterMs', () => {
  const now = Date.parse('2025-03-01T12:00:00Z')

  it.each([
    ['5', 5000],
    ['0', 0],
    [' 7 ', 7000],
  ])('reads delta-seconds %j as %i ms', (header, ms) => {
    expect(retryAfterMs(header, now)).toBe(ms)
  })

  it('reads an HTTP date as the time left until it', () => {
    expect(retryAfterMs(new Date(now + 30_000).toUTCString(), now)).toBe(30_000)
    expect(retryAfterMs('Sat, 01 Mar 2025 12:00:30 GMT', now)).toBe(30_000)
  })

  it('reads a date already past as no wait', () => {
    expect(retryAfterMs(new Date(now - 60_000).toUTCString(), now)).toBe(0)
  })

  it.each([
    ['', ''],
    ['undefined', undefined],
    ['a word', 'soon'],
  ])('has no wait for %s', (_what, header) => {
    expect(retryAfterMs(header, now)).toBeUndefined()
  })

  // V8's Date.parse would read '-1' and '1.5' as dates in 2001 (a wait of 0): only IMF-fixdate counts.
  it.each(['-1', '1.5'])('has no wait for %j, which is neither delta-seconds nor an HTTP date', (header) => {
    expect(retryAfterMs(header, now)).toBeUndefined()
  })
})

describe('classifyStripeError', () => {
  const generate = (raw: Parameters<typeof Stripe.errors.StripeError.generate>[0]) => Stripe.errors.StripeError.generate(raw)

  it('refuses a declined card with the issuer\'s decline code, telling the shopper to try another card', () => {
    const stripeError = generate({
      statusCode: 402,
      type: 'card_error',
      code: 'card_declined',
      decline_code: 'insufficient_funds',
      message: 'Your card has insufficient funds.',
    })
    expect(stripeError).toBeInstanceOf(Stripe.errors.StripeCardError)
    const refused = expectRefused(classifyStripeError(stripeError))
    expect(refused.refusal).toEqual({
      code: 'insufficient_funds',
      message: 'Your card has insufficient funds. Try another card or payment method.',
      providerMessage: 'Your card has insufficient funds.',
    })
    expect(refused.refusal.message).toMatch(/Try another card or payment method\.$/)
  })

  // StripeCardError sets decline_code to '' when Stripe sent none: the error's code stands in.
  it('refuses a card error without a decline code with its error code', () => {
    const stripeError = new Stripe.errors.StripeCardError({
      statusCode: 402,
      type: 'card_error',
      code: 'incorrect_cvc',
      message: 'Your card\'s security code is incorrect.',
    })
    const refused = expectRefused(classifyStripeError(stripeError))
    expect(refused.refusal).toEqual({
      code: 'incorrect_cvc',
      message: 'Your card\'s security code is incorrect. Try another card or payment method.',
      providerMessage: 'Your card\'s security code is incorrect.',
    })
  })

  it('refuses an invalid request (400) for its details, keeping Stripe\'s words for the shop', () => {
    const message = 'Amount must be no more than $999,999.99'
    const stripeError = generate({ statusCode: 400, type: 'invalid_request_error', code: 'amount_too_large', param: 'amount', message })
    expect(stripeError).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError)
    const refused = expectRefused(classifyStripeError(stripeError))
    expect(refused.refusal).toEqual({ code: 'amount_too_large', message: REFUSED_DETAILS_MESSAGE, providerMessage: message })
  })

  it('refuses an idempotency error (400: the key reused with other parameters)', () => {
    const stripeError = generate({
      statusCode: 400,
      type: 'idempotency_error',
      message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.',
    })
    expect(stripeError).toBeInstanceOf(Stripe.errors.StripeIdempotencyError)
    const refused = expectRefused(classifyStripeError(stripeError))
    expect(refused.refusal.message).toBe(REFUSED_DETAILS_MESSAGE)
    expect(refused.refusal.providerMessage).toBe(stripeError.message)
  })

  it('retries a 409: the same idempotency key still in flight', () => {
    const stripeError = generate({
      statusCode: 409,
      type: 'invalid_request_error',
      code: 'idempotency_key_in_use',
      message: 'There is currently another in-progress request using this Stripe-Idempotency-Key.',
    })
    const unavailable = expectUnavailable(classifyStripeError(stripeError))
    expect(unavailable.retryAfterMs).toBeUndefined()
    expect(unavailable.message).toContain('HTTP 409')
    expect(unavailable.cause).toBe(stripeError)
  })

  it('retries a rate limit (429) after its Retry-After', () => {
    const stripeError = generate({ statusCode: 429, type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests.', headers: { 'retry-after': '7' } })
    expect(stripeError).toBeInstanceOf(Stripe.errors.StripeRateLimitError)
    const unavailable = expectUnavailable(classifyStripeError(stripeError))
    expect(unavailable.retryAfterMs).toBe(7000)
    expect(unavailable.message).toContain('HTTP 429')
  })

  it.each([500, 502, 503])('retries a server error (%i)', (statusCode) => {
    const stripeError = generate({ statusCode, type: 'api_error', message: 'Something went wrong on Stripe\'s end.' })
    expect(stripeError).toBeInstanceOf(Stripe.errors.StripeAPIError)
    const unavailable = expectUnavailable(classifyStripeError(stripeError))
    expect(unavailable.retryAfterMs).toBeUndefined()
    expect(unavailable.message).toContain(`HTTP ${statusCode}`)
  })

  it('retries a connection error, with no wait of its own', () => {
    const stripeError = new Stripe.errors.StripeConnectionError({
      message: 'An error occurred with our connection to Stripe. Request was retried 0 times.',
      detail: new Error('connect ECONNREFUSED 127.0.0.1:12111'),
    })
    const unavailable = expectUnavailable(classifyStripeError(stripeError))
    expect(unavailable.retryAfterMs).toBeUndefined()
    expect(unavailable.message).not.toContain('HTTP')
    expect(unavailable.cause).toBe(stripeError)
  })

  it.each([
    [401, Stripe.errors.StripeAuthenticationError, 'authentication_error', 'Invalid API Key provided: sk_test_****0123'],
    [403, Stripe.errors.StripePermissionError, 'invalid_request_error', 'The provided key does not have the required permissions for this endpoint.'],
  ] as const)('retries a %i: a key being fixed', (statusCode, errorClass, type, message) => {
    const stripeError = generate({ statusCode, type, message })
    expect(stripeError).toBeInstanceOf(errorClass)
    const unavailable = expectUnavailable(classifyStripeError(stripeError))
    expect(unavailable.message).toContain(`HTTP ${statusCode}`)
  })

  it('passes any other error through unchanged', () => {
    const error = new Error('not from Stripe')
    expect(classifyStripeError(error)).toBe(error)
    const typed = new TypeError('a bug')
    expect(classifyStripeError(typed)).toBe(typed)
  })
})

/** The client's own error: (message, httpStatusCode, ApiResponse, rawHttpClientData). */
const { MidtransError } = midtrans

describe('classifyMidtransError', () => {
  const httpError = (status: number | string, answer: Record<string, unknown> | null = null, headers: Record<string, string> = {}) =>
    new MidtransError(`Midtrans API is returning API error. HTTP status code: ${status}. API response: ${JSON.stringify(answer)}`, status, answer, { headers })

  it('retries a connection failure (no status)', () => {
    const midtransError = new MidtransError('Midtrans API request failed. HTTP response not found, likely connection failure, with message: "connect ECONNREFUSED"', null, null, null)
    const unavailable = expectUnavailable(classifyMidtransError(midtransError))
    expect(unavailable.retryAfterMs).toBeUndefined()
    expect(unavailable.message).toMatch(/^Midtrans unreachable: /)
    expect(unavailable.cause).toBe(midtransError)
  })

  it.each([401, 403, 409, 500, 503])('retries HTTP %i', (status) => {
    const midtransError = httpError(status, { status_code: String(status), status_message: 'Try again later' })
    const unavailable = expectUnavailable(classifyMidtransError(midtransError))
    expect(unavailable.message).toBe(`Midtrans ${status}: Try again later`)
    expect(unavailable.retryAfterMs).toBeUndefined()
  })

  it('retries the status code of a 200 answer\'s body, a string: \'503\'', () => {
    const unavailable = expectUnavailable(classifyMidtransError(httpError('503', { status_code: '503', status_message: 'Service unavailable' })))
    expect(unavailable.message).toBe('Midtrans 503: Service unavailable')
  })

  it('retries a 429 after its Retry-After, from the axios error\'s response or the response itself', () => {
    const fromError = new MidtransError('Midtrans API is returning API error. HTTP status code: 429.', 429, null, { response: { headers: { 'retry-after': '3' } } })
    expect(expectUnavailable(classifyMidtransError(fromError)).retryAfterMs).toBe(3000)
    expect(expectUnavailable(classifyMidtransError(httpError(429, null, { 'retry-after': '3' }))).retryAfterMs).toBe(3000)
  })

  it('refuses a 400 for its details, with the status message and every validation message', () => {
    const answer = {
      status_code: '400',
      status_message: 'One or more parameters in the payload is invalid.',
      validation_messages: ['transaction_details.gross_amount is required'],
    }
    const refused = expectRefused(classifyMidtransError(httpError(400, answer)))
    expect(refused.refusal.code).toBe('400')
    expect(refused.refusal.message).toBe(REFUSED_DETAILS_MESSAGE)
    expect(refused.refusal.providerMessage).toContain('One or more parameters in the payload is invalid.')
    expect(refused.refusal.providerMessage).toContain('transaction_details.gross_amount is required')
  })

  it('refuses a 404', () => {
    const refused = expectRefused(classifyMidtransError(httpError(404, { status_code: '404', status_message: 'Transaction doesn\'t exist.' })))
    expect(refused.refusal).toEqual({ code: '404', message: REFUSED_DETAILS_MESSAGE, providerMessage: 'Transaction doesn\'t exist.' })
  })

  it('passes any other error through unchanged', () => {
    const error = new Error('not from Midtrans')
    expect(classifyMidtransError(error)).toBe(error)
  })
})
