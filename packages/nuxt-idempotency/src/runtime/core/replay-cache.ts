import { createHash, createHmac, timingSafeEqual } from 'node:crypto'
import type { Storage } from 'unstorage'
import { ExpiringMap } from '@idempotent-checkout/db-kit/expiring-map'
import { openResponse, type ResponseCipher, sealResponse, UnreadableStoredResponse } from './encryption'
import type { RecordView, StoredResponse } from './store'

/** What a replay, or a 422 for another request, needs of a finished record. */
export interface FinishedRecord {
  scope: string
  key: string
  route: string
  fingerprint: string
  response: Pick<StoredResponse, 'status' | 'body' | 'headers'>
  /** Epoch ms after which no cache may answer for it: before the record's own expiry. */
  cacheUntil: number
  /** The record's own expires_at, as the database row holds it (epoch ms). */
  expiresAt: number
}

/** Why an entry of the shared tier was not believed (the request went on to Postgres). unreadable: sealed under a key no longer configured. */
export type RejectedEntry = 'signature' | 'mismatch' | 'expired' | 'unreadable'

export interface ReplayCache {
  /** This instance's tier only: no I/O. */
  local(scope: string, key: string): FinishedRecord | undefined
  /**
   * The shared tier only: a replay of this very request (same fingerprint), signed with this
   * deployment's key. Undefined without a shared tier, on a miss, or when it cannot answer.
   */
  shared(scope: string, key: string, fingerprint: string): Promise<FinishedRecord | undefined>
  /** Remembers a finished record in this instance at once, and in the shared tier in the background. */
  put(record: FinishedRecord): void
}

export interface ReplayCacheOptions {
  /** The bound of this instance's tier, in bytes of the records' JSON. */
  maxBytes: number
  /**
   * Shared by every instance (Redis through unstorage); absent: this instance's tier only. Its
   * entries are signed with `signingKey` (HMAC-SHA256), so that whoever can write to Redis cannot
   * make an instance answer with a response of their own: every instance on one Redis needs the same key.
   */
  shared?: { storage: Storage, signingKey: string }
  /** Encrypts the responses of the shared tier's entries (this instance's own tier stays in memory, plain). */
  cipher?: ResponseCipher
  /** The shared tier failed (Redis away): the request goes on to Postgres as on a miss. */
  onSharedError?: (error: unknown) => void
  /** An entry of the shared tier was not believed: the request goes on to Postgres as on a miss. */
  onRejected?: (reason: RejectedEntry) => void
}

/** A cached record is dropped this long before the record expires, against clock skew with the database. */
export const CACHE_EXPIRY_MARGIN_MS = 60_000
/** The shared tier keeps a response at most this long: replays mostly come soon after the first request. */
const SHARED_MAX_SECONDS = 3600

/** An entry as the shared tier holds it: the record's JSON exactly as signed, and its signature. */
interface SignedEntry {
  record: string
  mac: string
}

/**
 * Finished records, so that a replay costs no database round trip: a finished record never changes
 * until it expires (only then may its key be executed again). Postgres stays the source of truth:
 * a miss, or a shared tier that cannot answer (or whose entry is not believed), only costs a read there.
 */
export function createReplayCache(options: ReplayCacheOptions): ReplayCache {
  const local = new ExpiringMap<{ record: FinishedRecord, bytes: number }>(options.maxBytes, entry => entry.bytes)
  const localKey = (scope: string, key: string) => `${scope}\n${key}`
  // Hashed: unstorage folds `/`, `\` and `:` in keys together, and a key may contain any of them.
  const storageKey = (scope: string, key: string) => createHash('sha256').update(localKey(scope, key)).digest('base64url')
  const shared = options.shared?.storage
  const macOf = (json: string) => createHmac('sha256', options.shared!.signingKey).update(json).digest()

  function remember(record: FinishedRecord, bytes: number): void {
    local.set(localKey(record.scope, record.key), { record, bytes }, record.cacheUntil)
  }

  /** The entry's record when it is signed with our key and answers this very request; undefined otherwise. */
  function believed(found: unknown, scope: string, key: string, fingerprint: string): FinishedRecord | undefined {
    const entry = found as SignedEntry | null
    if (entry === null || typeof entry !== 'object' || typeof entry.record !== 'string' || typeof entry.mac !== 'string') return rejected('signature')
    const mac = Buffer.from(entry.mac, 'base64url')
    const expected = macOf(entry.record)
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return rejected('signature')
    const record = JSON.parse(entry.record) as unknown
    if (!isFinishedRecord(record) || record.scope !== scope || record.key !== key || record.fingerprint !== fingerprint) return rejected('mismatch')
    if (record.cacheUntil <= Date.now()) return rejected('expired')
    try {
      return { ...record, response: openResponse(options.cipher, record.response, scope, key) }
    }
    catch (error) {
      if (error instanceof UnreadableStoredResponse) return rejected('unreadable')
      throw error
    }
  }

  function rejected(reason: RejectedEntry): undefined {
    options.onRejected?.(reason)
    return undefined
  }

  return {

    local: (scope, key) => local.get(localKey(scope, key))?.record,

    async shared(scope, key, fingerprint) {
      if (!shared) return undefined
      let found: unknown
      try {
        found = await shared.getItem(storageKey(scope, key))
      }
      catch (error) {
        options.onSharedError?.(error)
        return undefined
      }
      if (found === null) return undefined
      const record = believed(found, scope, key, fingerprint)
      if (record) remember(record, JSON.stringify(record).length)
      return record
    },

    put(record) {
      const json = JSON.stringify(record)
      remember(record, json.length)
      if (!shared) return
      const ttlSeconds = Math.min(SHARED_MAX_SECONDS, Math.floor((record.cacheUntil - Date.now()) / 1000))
      if (ttlSeconds < 1) return
      // Sealed with the record's scope and key, as Postgres holds it: the entry opens only for that key.
      const sharedJson = options.cipher ? JSON.stringify({ ...record, response: sealResponse(options.cipher, record.response, record.scope, record.key) }) : json
      const entry: SignedEntry = { record: sharedJson, mac: macOf(sharedJson).toString('base64url') }
      shared.setItem(storageKey(record.scope, record.key), JSON.stringify(entry), { ttl: ttlSeconds }).catch(error => options.onSharedError?.(error))
    },
  }
}

function isFinishedRecord(value: unknown): value is FinishedRecord & { expiresAt: number } {
  const record = value as FinishedRecord | null
  return typeof record === 'object' && record !== null && typeof record.scope === 'string' && typeof record.key === 'string'
    && typeof record.fingerprint === 'string' && typeof record.route === 'string' && typeof record.expiresAt === 'number'
    && typeof record.cacheUntil === 'number' && record.cacheUntil === record.expiresAt - CACHE_EXPIRY_MARGIN_MS
    && typeof record.response?.status === 'number' && typeof record.response.body === 'object'
}

/** A finished record as the database holds it, for the caches. */
export function finishedFromView(view: Pick<RecordView, 'scope' | 'key' | 'route' | 'fingerprint' | 'responseStatus' | 'responseBody' | 'responseHeaders' | 'expiresAt'>): FinishedRecord {
  return {
    scope: view.scope,
    key: view.key,
    route: view.route,
    fingerprint: view.fingerprint,
    response: { status: view.responseStatus ?? 200, body: view.responseBody ?? {}, headers: view.responseHeaders ?? undefined },
    cacheUntil: view.expiresAt.getTime() - CACHE_EXPIRY_MARGIN_MS,
    expiresAt: view.expiresAt.getTime(),
  }
}
