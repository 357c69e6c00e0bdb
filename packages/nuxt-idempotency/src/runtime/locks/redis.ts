import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { RedisClient, Locks } from './types'
import { LockBackendError } from './types'

// A lock's value is its owner token, or `<token> <tag>` for a tagged lock. Owner-checked writes must
// be one atomic step: a GET followed by a separate PEXPIRE/DEL could act on a lock that expired and
// was re-acquired by someone else in between.
const HELD_BY_OWNER = `
local held = redis.call('get', KEYS[1])
local owned = held and (held == ARGV[1] or string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ' ')`

const EXTEND_IF_OWNER = `${HELD_BY_OWNER}
if owned then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0`

const RELEASE_IF_OWNER = `${HELD_BY_OWNER}
if owned then
  return redis.call('del', KEYS[1])
end
return 0`

// acquireTagged without SET … NX GET (Redis before 7, or a service that refuses it): the same one
// step, one key, in a script. `return false` answers nil: the lock was free and is now taken.
const ACQUIRE_TAGGED = `
local held = redis.call('get', KEYS[1])
if held then
  return held
end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`

const FIRST_POLL_DELAY_MS = 10
const MAX_POLL_DELAY_MS = 100

export interface RedisLocksOptions {
  /**
   * How acquireTagged takes a lock: `auto` (default) sends SET … NX GET and, the first time the
   * server refuses it with an `ERR` reply (Redis before 7 answers "syntax error"; a managed service
   * may not know the form), switches to an equivalent script for good; `script` always uses the script.
   */
  taggedAcquire?: 'auto' | 'script'
  /** Called once when `auto` switches to the script, with the server's refusal. */
  onTaggedFallback?: (refusal: Error) => void
}

/**
 * Locks stored as `key = owner token` with a PX expiry. The caller owns `redis` (connection,
 * keyPrefix, timeouts) and should disable the offline queue and bound retries and command time, so
 * that an unreachable Redis surfaces here as a prompt LockBackendError rather than a hang. Every
 * command and script touches one key, so the locks work alike on one node, behind Sentinel and in a
 * Redis Cluster (each key on the node of its slot).
 */
export function createRedisLocks(redis: RedisClient, options: RedisLocksOptions = {}): Locks {
  // Aborted by close() so that waitForRelease polls stop instead of outliving their owner.
  const closing = new AbortController()
  let taggedByScript = options.taggedAcquire === 'script'

  async function send<T>(operation: string, key: string, command: () => Promise<T>): Promise<T> {
    try {
      return await command()
    }
    catch (cause) {
      throw new LockBackendError(`Redis lock ${operation} failed for key "${key}"`, { cause })
    }
  }

  /** The holder's value, or null when the lock was free and `value` now holds it. */
  async function setUnlessHeld(key: string, value: string, ttlMs: number): Promise<string | null> {
    if (!taggedByScript) {
      try {
        return await redis.call('set', key, value, 'PX', ttlMs, 'NX', 'GET') as string | null
      }
      catch (cause) {
        if (!refusesSetNxGet(cause)) throw new LockBackendError(`Redis lock acquire failed for key "${key}"`, { cause })
        if (!taggedByScript) options.onTaggedFallback?.(cause)
        taggedByScript = true
      }
    }
    return await send('acquire', key, () => redis.eval(ACQUIRE_TAGGED, 1, key, value, ttlMs)) as string | null
  }

  async function isHeld(key: string): Promise<boolean> {
    return await send('waitForRelease', key, () => redis.exists(key)) === 1
  }

  return {
    kind: 'redis',

    async acquire(key, ttlMs) {
      const token = randomUUID()
      const reply = await send('acquire', key, () => redis.set(key, token, 'PX', ttlMs, 'NX'))
      return reply === 'OK' ? token : null
    },

    // SET … NX GET (Redis 7): takes the lock, or answers the holder's value, in one command (or the script).
    async acquireTagged(key, ttlMs, tag) {
      const token = randomUUID()
      const held = await setUnlessHeld(key, `${token} ${tag}`, ttlMs)
      if (held === null) return { acquired: true, token }
      const space = held.indexOf(' ')
      return { acquired: false, holderTag: space < 0 ? undefined : held.slice(space + 1) }
    },

    async extend(key, token, ttlMs) {
      // eval (not a raw key string) so that ioredis applies the client's keyPrefix to KEYS[1].
      const reply = await send('extend', key, () => redis.eval(EXTEND_IF_OWNER, 1, key, token, ttlMs))
      return reply === 1
    },

    async release(key, token) {
      const reply = await send('release', key, () => redis.eval(RELEASE_IF_OWNER, 1, key, token))
      return reply === 1
    },

    // Redis has no cheap "notify on delete or expiry" for a single key, so poll with a short
    // backoff: quick to notice a release, yet at most ~10 commands a second per waiter.
    async waitForRelease(key, timeoutMs) {
      const deadline = performance.now() + timeoutMs
      let pollDelayMs = FIRST_POLL_DELAY_MS
      while (await isHeld(key)) {
        const remainingMs = deadline - performance.now()
        if (remainingMs <= 0 || closing.signal.aborted) return false
        try {
          await sleep(Math.min(pollDelayMs, remainingMs), undefined, { signal: closing.signal, ref: false })
        }
        catch {
          return false // close() aborted the sleep
        }
        pollDelayMs = Math.min(pollDelayMs * 2, MAX_POLL_DELAY_MS)
      }
      return true
    },

    // The connection belongs to the caller; only our own poll timers are stopped here.
    async close() {
      closing.abort()
    },
  }
}

/**
 * The server answered SET … NX GET with an error of its own (`ERR syntax error` before Redis 7,
 * `ERR unknown …` where a service does not take it), not a failure to reach it (a timeout, a closed
 * connection) nor a passing state (READONLY, LOADING, CLUSTERDOWN, MOVED, TRYAGAIN, BUSY, OOM).
 */
function refusesSetNxGet(error: unknown): error is Error {
  return error instanceof Error && error.name === 'ReplyError' && /^ERR\b/.test(error.message)
}

/** `host:port,host:port,…` (REDIS_CLUSTER_NODES, REDIS_SENTINELS) as ioredis takes it; the port after the last colon. */
export function parseHostPorts(list: string): Array<{ host: string, port: number }> {
  return list.split(',').map(entry => entry.trim()).filter(Boolean).map((entry) => {
    const colon = entry.lastIndexOf(':')
    return { host: entry.slice(0, colon), port: Number(entry.slice(colon + 1)) }
  })
}
