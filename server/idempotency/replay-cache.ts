import { createHash } from 'node:crypto'
import type { Storage } from 'unstorage'
import { ExpiringMap } from '../cache/expiring-map'
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
}

export interface ReplayCache {
  /** This instance's tier only: no I/O. */
  local(scope: string, key: string): FinishedRecord | undefined
  /** The shared tier only (undefined without one, on a miss, or when it cannot answer). */
  shared(scope: string, key: string): Promise<FinishedRecord | undefined>
  /** Remembers a finished record in this instance at once, and in the shared tier in the background. */
  put(record: FinishedRecord): void
}

export interface ReplayCacheOptions {
  /** The bound of this instance's tier, in bytes of the records' JSON. */
  maxBytes: number
  /** Shared by every instance (Redis through unstorage); absent: this instance's tier only. */
  shared?: Storage
  /** The shared tier failed (Redis away): the request goes on to Postgres as on a miss. */
  onSharedError?: (error: unknown) => void
}

/** A cached record is dropped this long before the record expires, against clock skew with the database. */
export const CACHE_EXPIRY_MARGIN_MS = 60_000
/** The shared tier keeps a response at most this long: replays mostly come soon after the first request. */
const SHARED_MAX_SECONDS = 3600

/**
 * Finished records, so that a replay costs no database round trip: a finished record never changes
 * until it expires (only then may its key be executed again). Postgres stays the source of truth:
 * a miss, or a shared tier that cannot answer, only costs a read there.
 */
export function createReplayCache(options: ReplayCacheOptions): ReplayCache {
  const local = new ExpiringMap<{ record: FinishedRecord, bytes: number }>(options.maxBytes, entry => entry.bytes)
  const localKey = (scope: string, key: string) => `${scope}\n${key}`
  // Hashed: unstorage folds `/`, `\` and `:` in keys together, and a key may contain any of them.
  const sharedKey = (scope: string, key: string) => createHash('sha256').update(localKey(scope, key)).digest('base64url')

  function remember(record: FinishedRecord, bytes: number): void {
    local.set(localKey(record.scope, record.key), { record, bytes }, record.cacheUntil)
  }

  return {
    local: (scope, key) => local.get(localKey(scope, key))?.record,

    async shared(scope, key) {
      if (!options.shared) return undefined
      try {
        const found = await options.shared.getItem<FinishedRecord>(sharedKey(scope, key))
        if (!isFinishedRecord(found) || found.scope !== scope || found.key !== key || found.cacheUntil <= Date.now()) return undefined
        remember(found, JSON.stringify(found).length)
        return found
      }
      catch (error) {
        options.onSharedError?.(error)
        return undefined
      }
    },

    put(record) {
      const json = JSON.stringify(record)
      remember(record, json.length)
      const ttlSeconds = Math.min(SHARED_MAX_SECONDS, Math.floor((record.cacheUntil - Date.now()) / 1000))
      if (!options.shared || ttlSeconds < 1) return
      options.shared.setItem(sharedKey(record.scope, record.key), json, { ttl: ttlSeconds }).catch(error => options.onSharedError?.(error))
    },
  }
}

function isFinishedRecord(value: unknown): value is FinishedRecord {
  const record = value as FinishedRecord | null
  return typeof record === 'object' && record !== null && typeof record.fingerprint === 'string' && typeof record.route === 'string'
    && typeof record.cacheUntil === 'number' && typeof record.response?.status === 'number' && typeof record.response.body === 'object'
}

/** A finished record as the database holds it, for the caches. */
export function finishedFromView(view: RecordView): FinishedRecord {
  return {
    scope: view.scope,
    key: view.key,
    route: view.route,
    fingerprint: view.fingerprint,
    response: { status: view.responseStatus ?? 200, body: view.responseBody ?? {}, headers: view.responseHeaders ?? undefined },
    cacheUntil: view.expiresAt.getTime() - CACHE_EXPIRY_MARGIN_MS,
  }
}
