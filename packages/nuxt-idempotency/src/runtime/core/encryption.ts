import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'

/**
 * Stored responses encrypted at rest (AES-256-GCM): the record's body and headers in Postgres, and
 * the shared replay cache's entries in Redis. Sealed under the first key; any listed key opens, so
 * a key is rotated by putting the new one first and keeping the old one until the TTL has passed.
 */

/** What a sealed value looks like where a response body is stored: a JSON object, every field a string. */
export interface SealedValue {
  /** Marks the object as sealed: a plain body stored before encryption was turned on has no such field. */
  'nuxt-idempotency:sealed': 'aes-256-gcm'
  /** The key's id: the first 8 hex digits of the SHA-256 of the key. */
  'kid': string
  /** The 12-byte nonce, base64url. */
  'iv': string
  /** Ciphertext and its 16-byte tag, base64url. */
  'data': string
}

export interface ResponseCipher {
  /** The first key's id: what new values are sealed under. */
  readonly kid: string
  /** Seals `value` (as JSON), bound to `context` (the record's scope and key): it opens only there. */
  seal(value: unknown, context: string): SealedValue
  /** The value sealed; throws UnreadableStoredResponse when no listed key opens it. */
  open(sealed: SealedValue, context: string): unknown
}

/** A stored response that no listed key can open: sealed under a key removed from the list, or altered. */
export class UnreadableStoredResponse extends Error {
  constructor(readonly kid: string) {
    super(`The stored response is sealed under key ${kid}, which is not among the configured encryption keys (or it was altered).`)
    this.name = 'UnreadableStoredResponse'
  }
}

const MARK = 'nuxt-idempotency:sealed'
const IV_BYTES = 12
const TAG_BYTES = 16

export function isSealed(value: unknown): value is SealedValue {
  const sealed = value as Partial<SealedValue> | null
  return typeof sealed === 'object' && sealed !== null && sealed[MARK] === 'aes-256-gcm'
    && typeof sealed.kid === 'string' && typeof sealed.iv === 'string' && typeof sealed.data === 'string'
}

export const encryptionKeyId = (key: Buffer): string => createHash('sha256').update(key).digest('hex').slice(0, 8)

/**
 * `keys`: comma-separated base64 keys of 32 bytes each (`openssl rand -base64 32`), the one to seal
 * with first. Empty: no encryption (undefined). A key of another length stops the server at start-up.
 */
export function createResponseCipher(keys: string | undefined): ResponseCipher | undefined {
  const listed = (keys ?? '').split(',').map(key => key.trim()).filter(Boolean)
  if (!listed.length) return undefined
  const byId = new Map<string, Buffer>()
  listed.forEach((text, index) => {
    const key = Buffer.from(text, 'base64')
    if (key.length !== 32) {
      throw new Error(`nuxt-idempotency: encryption key #${index + 1} in NUXT_IDEMPOTENCY_ENCRYPTION_KEYS decodes to ${key.length} bytes, not 32. Generate one with \`openssl rand -base64 32\`.`)
    }
    byId.set(encryptionKeyId(key), key)
  })
  const [kid, key] = [...byId][0]!
  return {
    kid,
    seal(value, context) {
      const iv = randomBytes(IV_BYTES)
      const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(context))
      const data = Buffer.concat([cipher.update(JSON.stringify(value) ?? 'null', 'utf8'), cipher.final(), cipher.getAuthTag()])
      return { [MARK]: 'aes-256-gcm', kid, iv: iv.toString('base64url'), data: data.toString('base64url') }
    },
    open(sealed, context) {
      const opener = byId.get(sealed.kid)
      if (!opener) throw new UnreadableStoredResponse(sealed.kid)
      const data = Buffer.from(sealed.data, 'base64url')
      try {
        const decipher = createDecipheriv('aes-256-gcm', opener, Buffer.from(sealed.iv, 'base64url')).setAAD(Buffer.from(context))
        decipher.setAuthTag(data.subarray(data.length - TAG_BYTES))
        return JSON.parse(Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]).toString('utf8')) as unknown
      }
      catch {
        throw new UnreadableStoredResponse(sealed.kid)
      }
    },
  }
}

/** The AAD of a record's sealed response: its ciphertext cannot be moved to another key's record. */
export const sealContext = (scope: string, key: string): string => `${scope}\n${key}`

interface PlainResponse { status: number, body: Record<string, unknown>, headers?: Record<string, string> }

/**
 * The response as stored: body and headers sealed together in the body column (status stays plain,
 * the headers column holds `{}`). Without a cipher, the response itself.
 */
export function sealResponse<R extends PlainResponse>(cipher: ResponseCipher | undefined, response: R, scope: string, key: string): R {
  if (!cipher) return response
  const sealed = cipher.seal({ body: response.body, headers: response.headers ?? {} }, sealContext(scope, key))
  return { ...response, body: sealed as unknown as Record<string, unknown>, headers: {} }
}

/**
 * A stored response readable again: opened when sealed (throws UnreadableStoredResponse when no key
 * opens it), as it is when plain (stored before encryption was turned on).
 */
export function openResponse<R extends PlainResponse>(cipher: ResponseCipher | undefined, response: R, scope: string, key: string): R {
  if (!isSealed(response.body)) return response
  if (!cipher) throw new UnreadableStoredResponse(response.body.kid)
  const opened = cipher.open(response.body, sealContext(scope, key)) as { body: Record<string, unknown>, headers: Record<string, string> }
  return { ...response, body: opened.body, headers: opened.headers }
}
