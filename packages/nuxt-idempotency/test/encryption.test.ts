import { createHash, randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { createResponseCipher, openResponse, sealResponse, UnreadableStoredResponse } from '../src/runtime/core/encryption'

// The at-rest format of stored responses: what the suites over HTTP (options.test.ts) cannot see.
describe('stored responses encrypted with the configured keys', () => {
  const [first, second] = [randomBytes(32), randomBytes(32)]
  const response = { status: 201, body: { id: 'sub_1', plan: 'secret-plan' }, headers: { Location: '/api/subscriptions/sub_1' } }

  it('seals under the first key, with its id (the first 8 hex of its SHA-256) beside the ciphertext; status stays plain', () => {
    const cipher = createResponseCipher(`${first.toString('base64')}, ${second.toString('base64')}`)!
    const sealed = sealResponse(cipher, response, 'route:POST /api/x', 'k1')
    expect(sealed.status).toBe(201)
    expect(sealed.headers).toEqual({})
    expect(sealed.body).toMatchObject({ 'nuxt-idempotency:sealed': 'aes-256-gcm', 'kid': createHash('sha256').update(first).digest('hex').slice(0, 8) })
    expect(JSON.stringify(sealed)).not.toContain('secret-plan')
    expect(JSON.stringify(sealed)).not.toContain('/api/subscriptions/sub_1')
    expect(openResponse(cipher, sealed, 'route:POST /api/x', 'k1')).toEqual(response)
  })

  it('opens with any listed key (rotation), refuses once the key is gone or the record is another key\'s', () => {
    const old = createResponseCipher(second.toString('base64'))!
    const sealed = sealResponse(old, response, 's', 'k1')
    expect(openResponse(createResponseCipher(`${first.toString('base64')},${second.toString('base64')}`), sealed, 's', 'k1')).toEqual(response)
    expect(() => openResponse(createResponseCipher(first.toString('base64')), sealed, 's', 'k1')).toThrow(UnreadableStoredResponse)
    expect(() => openResponse(undefined, sealed, 's', 'k1')).toThrow(UnreadableStoredResponse)
    // Bound to its scope and key: moved to another record, it does not open.
    expect(() => openResponse(old, sealed, 's', 'k2')).toThrow(UnreadableStoredResponse)
  })

  it('leaves a plain response (stored before encryption was on) as it is, and is off without keys', () => {
    expect(openResponse(createResponseCipher(first.toString('base64')), response, 's', 'k1')).toBe(response)
    expect(createResponseCipher('')).toBeUndefined()
    expect(sealResponse(undefined, response, 's', 'k1')).toBe(response)
  })

  it('refuses a key that is not 32 bytes, naming what to do', () => {
    expect(() => createResponseCipher(randomBytes(16).toString('base64'))).toThrow('encryption key #1 in NUXT_IDEMPOTENCY_ENCRYPTION_KEYS decodes to 16 bytes, not 32. Generate one with `openssl rand -base64 32`.')
  })
})
