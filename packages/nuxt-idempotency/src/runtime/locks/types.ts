import type { Cluster, Redis } from 'ioredis'

/** A client of any topology (one node, Sentinel, Cluster): each command goes to the node that holds its key. */
export type RedisClient = Redis | Cluster

/**
 * A short-lived mutual-exclusion lock with an owner token, for business resources such as
 * `lock:order:<id>`. Only the owner may extend or release it (atomic compare). A lock keeps two
 * workers off one resource; correctness always rests on Postgres (unique constraints and fenced
 * tokens), never on a lock alone.
 */
export interface Locks {
  readonly kind: 'redis' | 'memory'
  /** Tries once. Resolves to a fresh owner token, or null when someone else holds the key. */
  acquire(key: string, ttlMs: number): Promise<string | null>
  /**
   * Tries once, storing `tag` (one word, e.g. a request fingerprint) with the owner token; when
   * someone else holds the key, answers their tag instead, in the same step. extend and release
   * work as for `acquire`.
   */
  acquireTagged(key: string, ttlMs: number, tag: string): Promise<TaggedAcquire>
  /** Pushes the expiry to now + ttlMs if `token` still owns the key. */
  extend(key: string, token: string, ttlMs: number): Promise<boolean>
  /** Frees the key if `token` still owns it. */
  release(key: string, token: string): Promise<boolean>
  /** Resolves true once the key is free (immediately if it is), false when timeoutMs passes first. */
  waitForRelease(key: string, timeoutMs: number): Promise<boolean>
  /** Frees connections and timers. */
  close(): Promise<void>
}

/** The lock taken, with its owner token; or held by another, with the tag it was taken with (if any). */
export type TaggedAcquire = { acquired: true, token: string } | { acquired: false, holderTag: string | undefined }

/** Thrown when the lock backend (Redis) cannot answer; callers decide how to degrade. */
export class LockBackendError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'LockBackendError'
  }
}
