import { randomBytes, randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { setup, useTestContext } from '@nuxt/test-utils/e2e'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Answer, counts, executionsOf, pollUntil, send, type SendOptions } from './support/http'
import { type Instance, startInstance, waitUntilReady } from './support/instances'
import { expectProblem, SETUP_TIMEOUT_MS, signedDelivery, subscriptionsFixture, webhookSecret } from './support/key-contract'
import { fixtureBuildDir, missingServices, redisUrl, testDatabase } from './support/services'

/**
 * Each option of defineIdempotentEventHandler (and runOnce, and the module's encryption keys) on a
 * route of the `subscriptions` fixture, built once and started as real servers: on Postgres with
 * Redis, and the cheaper half again on embedded PGlite.
 */

const missing = await missingServices()
const database = testDatabase('options')
const TWO_MIB = 2 * 1024 * 1024
const newKey = () => randomBytes(32).toString('base64')

interface Outcome { route: string, key?: string, outcome: string, stored?: boolean, takeover?: boolean }
interface StoredRecord { scope: string, status: string, responseStatus: number | null, body: string | null, headers: string | null }

/** Requests to one running server. */
function client(instance: () => Instance) {
  const at = (path: string) => new URL(path, instance().url).toString()
  return {
    post: (path: string, options: SendOptions) => send(at(path), options),
    executions: async (route: string, key: string) => executionsOf(await counts(instance().url), route, key),
    records: async (key: string) => (await send(at(`/api/records?key=${encodeURIComponent(key)}`), { method: 'GET' })).body.records as StoredRecord[],
    outcomes: async (key: string) => ((await send(at('/api/outcomes'), { method: 'GET' })).body.outcomes as Outcome[]).filter(outcome => outcome.key === key),
    /** A body sent chunked (no Content-Length): only the bytes read can tell its size. */
    chunked: async (path: string, key: string, bytes: number): Promise<Answer> => {
      const chunk = new TextEncoder().encode('x'.repeat(64 * 1024))
      let sent = 0
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= bytes) return controller.close()
          sent += chunk.length
          controller.enqueue(chunk)
        },
      })
      const response = await fetch(at(path), { method: 'POST', headers: { 'idempotency-key': key, 'content-type': 'text/plain' }, body, duplex: 'half' } as RequestInit)
      const text = await response.text()
      return { status: response.status, headers: response.headers, body: JSON.parse(text) as Record<string, unknown> }
    },
  }
}

const replayed = (answer: Answer) => answer.headers.get('idempotent-replayed') === 'true'

/** The cases that run on both backends: storeIf, fingerprint, the body limit, runOnce. */
function sharedCases(instance: () => Instance, options: { recordsOf: boolean }) {
  const { post, executions, records, chunked } = client(instance)

  it('storeIf false: the answer is sent but not kept, and the same key runs again', async () => {
    const key = randomUUID()
    const first = await post('/api/options/store-if', { key, body: { keep: false } })
    expect({ status: first.status, body: first.body, replayed: replayed(first) }).toEqual({ status: 200, body: { stored: false, execution: 1 }, replayed: false })
    const second = await post('/api/options/store-if', { key, body: { keep: false } })
    expect({ status: second.status, body: second.body, replayed: replayed(second) }).toEqual({ status: 200, body: { stored: false, execution: 2 }, replayed: false })
    expect(await records(key)).toEqual([])
    // A kept answer is remembered as before: the third call stores, the fourth replays it.
    const kept = await post('/api/options/store-if', { key, body: { keep: true } })
    expect(kept.body).toEqual({ stored: true, execution: 3 })
    const replay = await post('/api/options/store-if', { key, body: { keep: true } })
    expect({ body: replay.body, replayed: replayed(replay) }).toEqual({ body: { stored: true, execution: 3 }, replayed: true })
    expect(await executions('options-store-if', key)).toBe(3)
  })

  it('storeIf false in atomic mode: the handler\'s writes commit, the record is not kept', async () => {
    const key = randomUUID()
    for (const execution of [1, 2]) {
      const answer = await post('/api/options/store-if-atomic', { key, body: { keep: false } })
      expect({ status: answer.status, body: answer.body, replayed: replayed(answer) }).toEqual({ status: 200, body: { stored: false, execution }, replayed: false })
    }
    expect(await records(key)).toEqual([])
    expect((await send(new URL(`/api/options/writes?key=${key}`, instance().url).toString(), { method: 'GET' })).body).toEqual({ writes: 2 })
  })

  it('fingerprint list: a changed ignored field replays, a changed listed field is 422', async () => {
    const key = randomUUID()
    const first = await post('/api/options/fields', { key, body: { amount: 10, customer: { id: 'c1', name: 'Ann' }, sentAt: '10:00:00' } })
    expect(first.body).toEqual({ amount: 10, sentAt: '10:00:00', execution: 1 })
    const retry = await post('/api/options/fields', { key, body: { amount: 10, customer: { id: 'c1', name: 'Anne' }, sentAt: '10:00:05', nonce: 'n2' } })
    expect({ status: retry.status, body: retry.body, replayed: replayed(retry) }).toEqual({ status: 200, body: first.body, replayed: true })
    expectProblem(await post('/api/options/fields', { key, body: { amount: 11, customer: { id: 'c1' }, sentAt: '10:00:00' } }), 422, 'idempotency-key-reused')
    expectProblem(await post('/api/options/fields', { key, body: { amount: 10, customer: { id: 'c2' }, sentAt: '10:00:00' } }), 422, 'idempotency-key-reused')
    expect(await executions('options-fields', key)).toBe(1)
  })

  it('fingerprint function: only its value counts', async () => {
    const key = randomUUID()
    const first = await post('/api/options/derived', { key, body: { orderId: 'ord_1', note: 'first' } })
    expect(first.body).toEqual({ orderId: 'ord_1', execution: 1 })
    const retry = await post('/api/options/derived', { key, body: { orderId: 'ord_1', note: 'second', at: Date.now() } })
    expect({ body: retry.body, replayed: replayed(retry) }).toEqual({ body: first.body, replayed: true })
    expectProblem(await post('/api/options/derived', { key, body: { orderId: 'ord_2', note: 'first' } }), 422, 'idempotency-key-reused')
    expect(await executions('options-derived', key)).toBe(1)
  })

  it('maxBodyBytes: a 2 MiB body is a 413 by its Content-Length or by the bytes read; nothing runs, nothing is stored', async () => {
    const key = randomUUID()
    const declared = await post('/api/subscriptions', { key, body: { plan: 'pro', padding: 'x'.repeat(TWO_MIB) } })
    expectProblem(declared, 413, 'request-too-large')
    expect(declared.body.type).toBe('/problems/request-too-large')
    expect(declared.body.detail).toContain('1048576 bytes')
    const streamed = await chunked('/api/subscriptions', key, TWO_MIB)
    expectProblem(streamed, 413, 'request-too-large')
    expect(streamed.body.detail).toContain('1048576 bytes')
    expect(await executions('subscriptions', key)).toBe(0)
    if (options.recordsOf) expect(await records(key)).toEqual([])
    // The key is still free: the same key with a body within the limit runs.
    const within = await post('/api/subscriptions', { key, body: { plan: 'pro' } })
    expect({ status: within.status, execution: within.body.execution }).toEqual({ status: 201, execution: 1 })
  })

  it('maxBodyBytes per route: 100 bytes', async () => {
    const key = randomUUID()
    const over = await post('/api/options/small-body', { key, body: { padding: 'x'.repeat(150) } })
    expectProblem(over, 413, 'request-too-large')
    expect(over.body.detail).toContain('100 bytes')
    expect(await executions('options-small-body', key)).toBe(0)
    const within = await post('/api/options/small-body', { key, body: { a: 1 } })
    expect(within.body).toEqual({ fields: 1, execution: 1 })
  })

  it('runOnce: concurrent calls with one id run the work once and return the same result', async () => {
    const id = `job-${randomUUID()}`
    const answers = await Promise.all([0, 1, 2].map(() => post('/api/run-once', { body: { id, sleepMs: 500 } })))
    expect(answers.map(answer => answer.status)).toEqual([200, 200, 200])
    const results = answers.map(answer => answer.body.result as { token: string, execution: number })
    expect(results[0]!.execution).toBe(1)
    expect(results[1]).toEqual(results[0])
    expect(results[2]).toEqual(results[0])
    expect((await post('/api/run-once', { body: { id } })).body.result).toEqual(results[0])
    expect(await executions('run-once', id)).toBe(1)
  })

  it('runOnce: a throwing work stores nothing, the next call runs it again', async () => {
    const id = `job-${randomUUID()}`
    const failed = await post('/api/run-once', { body: { id, fail: true } })
    expect({ status: failed.status, body: failed.body }).toEqual({ status: 500, body: { failed: 'the work failed' } })
    const ran = await post('/api/run-once', { body: { id } })
    expect(ran.status).toBe(200)
    expect((ran.body.result as { execution: number }).execution).toBe(2)
    expect((await post('/api/run-once', { body: { id } })).body.result).toEqual(ran.body.result)
    expect(await executions('run-once', id)).toBe(2)
  })
}

describe.skipIf(missing.length > 0)('route options', async () => {
  const keyPrefix = `test:${randomUUID()}:`
  const secret = webhookSecret()
  let entry = ''
  beforeAll(database.create, 60_000)
  // Built once by the test utilities; the servers are started below, with the environment each case needs.
  await setup({
    rootDir: subscriptionsFixture,
    buildDir: fixtureBuildDir('subscriptions-options'),
    build: true,
    server: false,
    setupTimeout: SETUP_TIMEOUT_MS,
  })
  beforeAll(() => {
    const { nitro } = useTestContext().nuxt!.options as unknown as { nitro: { output: { dir: string } } }
    entry = join(nitro.output.dir, 'server/index.mjs')
  })
  afterAll(() => database.drop(), 60_000)

  const started: Instance[] = []
  const start = async (env: Record<string, string>) => {
    const instance = await startInstance(entry, { NODE_ENV: 'production', NUXT_WEBHOOK_SECRET: secret, NUXT_IDEMPOTENCY_KEY_PREFIX: keyPrefix, ...env })
    started.push(instance)
    await waitUntilReady(instance, '/api/ready')
    return instance
  }
  afterAll(async () => {
    await Promise.all(started.map(instance => instance.stop()))
  }, 60_000)
  const postgresEnv = (extra: Record<string, string> = {}) => ({ DATABASE_URL: database.url, REDIS_URL: redisUrl, NUXT_IDEMPOTENCY_ENCRYPTION_KEYS: '', ...extra })

  describe('on Postgres and Redis', () => {
    let main: Instance
    beforeAll(async () => {
      main = await start(postgresEnv())
    }, 120_000)
    afterAll(() => main?.stop(), 30_000)
    const { post, executions, records, outcomes } = client(() => main)

    sharedCases(() => main, { recordsOf: true })

    it('scope: the same key of two users is two requests, of one user a replay', async () => {
      const key = randomUUID()
      const ann = await post('/api/options/scoped', { key, headers: { 'x-user': 'ann' }, body: {} })
      const bob = await post('/api/options/scoped', { key, headers: { 'x-user': 'bob' }, body: {} })
      expect([ann.body, bob.body]).toEqual([{ user: 'ann', execution: 1 }, { user: 'bob', execution: 1 }])
      const again = await post('/api/options/scoped', { key, headers: { 'x-user': 'ann' }, body: {} })
      expect({ body: again.body, replayed: replayed(again) }).toEqual({ body: ann.body, replayed: true })
      expect((await records(key)).map(record => record.scope).sort()).toEqual([`${keyPrefix}scope:user:ann`, `${keyPrefix}scope:user:bob`])
    })

    it('ttl: 1 s — a replay within it, a new execution after it', async () => {
      const key = randomUUID()
      expect((await post('/api/options/short-ttl', { key, body: {} })).body).toEqual({ execution: 1 })
      const within = await post('/api/options/short-ttl', { key, body: {} })
      expect({ body: within.body, replayed: replayed(within) }).toEqual({ body: { execution: 1 }, replayed: true })
      await sleep(1_100)
      const after = await post('/api/options/short-ttl', { key, body: {} })
      expect({ body: after.body, replayed: replayed(after) }).toEqual({ body: { execution: 2 }, replayed: false })
    })

    it('lease: after its owner died, a retry takes over once the route\'s 1.5 s lease ran out (the module\'s 30 s still holds)', async () => {
      const victim = await start(postgresEnv())
      const [short, long] = [randomUUID(), randomUUID()]
      const hanging = [
        send(`${victim.url}/api/options/short-lease`, { key: short, body: {}, headers: { 'x-hang-ms': '60000' } }),
        send(`${victim.url}/api/options/default-lease`, { key: long, body: {}, headers: { 'x-hang-ms': '60000' } }),
      ]
      for (const request of hanging) request.catch(() => {})
      await pollUntil('both handlers run on the victim', async () => {
        const found = await counts(victim.url)
        return found.started[`options-lease ${short}`] === 1 && found.started[`options-default-lease ${long}`] === 1
      })
      victim.child.kill('SIGKILL')
      await once(victim.child, 'exit')
      const killedAt = Date.now()
      // At once: both leases are live (renewed until the kill).
      expectProblem(await post('/api/options/short-lease', { key: short, body: {} }), 409, 'request-in-progress')
      expectProblem(await post('/api/options/default-lease', { key: long, body: {} }), 409, 'request-in-progress')
      await sleep(1_600 - (Date.now() - killedAt))
      const takenOver = await post('/api/options/short-lease', { key: short, body: {} })
      expect({ status: takenOver.status, execution: takenOver.body.execution, pid: takenOver.body.pid, replayed: replayed(takenOver) })
        .toEqual({ status: 200, execution: 1, pid: main.child.pid, replayed: false })
      expect(await outcomes(short)).toContainEqual({ route: 'POST /api/options/short-lease', key: short, outcome: 'miss', takeover: true })
      expectProblem(await post('/api/options/default-lease', { key: long, body: {} }), 409, 'request-in-progress')
      expect(await executions('options-default-lease', long)).toBe(0)
    })

    it('maxResponseBytes: a larger answer is sent, not stored, reported as response_too_large and logged; a smaller one replays', async () => {
      const key = randomUUID()
      for (const execution of [1, 2]) {
        const answer = await post('/api/options/big', { key, body: { size: 5000 } })
        expect({ status: answer.status, execution: answer.body.execution, size: (answer.body.padding as string).length, replayed: replayed(answer) })
          .toEqual({ status: 200, execution, size: 5000, replayed: false })
      }
      expect(await records(key)).toEqual([])
      expect(await outcomes(key)).toEqual([
        { route: 'POST /api/options/big', key, outcome: 'response_too_large', stored: false },
        { route: 'POST /api/options/big', key, outcome: 'response_too_large', stored: false },
      ])
      expect(main.output()).toContain('POST /api/options/big: the response is larger than maxResponseBytes (1000 bytes)')
      const small = randomUUID()
      const first = await post('/api/options/big', { key: small, body: { size: 10 } })
      const again = await post('/api/options/big', { key: small, body: { size: 10 } })
      expect({ body: again.body, replayed: replayed(again) }).toEqual({ body: first.body, replayed: true })
      expect((await outcomes(small)).map(outcome => outcome.outcome)).toEqual(['miss', 'replay'])
    })

    it('maxBodyBytes: a 2 MiB webhook delivery is a 413 before anything runs', async () => {
      const id = `msg_${randomUUID()}`
      const delivery = signedDelivery(secret, id, JSON.stringify({ type: 'big', padding: 'x'.repeat(TWO_MIB) }))
      const answer = await post('/api/webhooks/standard', delivery)
      expectProblem(answer, 413, 'request-too-large')
      expect(answer.body.detail).toContain('1048576 bytes')
      expect(await executions('webhooks', id)).toBe(0)
      expect(await records(id)).toEqual([])
    })

    it('runOnce: a call while another runs waits up to its lease, then throws IdempotencyInProgressError', async () => {
      const id = `job-${randomUUID()}`
      const first = post('/api/run-once', { body: { id, sleepMs: 2_000, lease: 300 } })
      await pollUntil('the work runs', async () => await executions('run-once', id) === 1)
      const second = await post('/api/run-once', { body: { id, lease: 300 } })
      expect({ status: second.status, body: second.body }).toEqual({ status: 409, body: { inProgress: true, name: 'IdempotencyInProgressError' } })
      const done = await first
      expect(done.status).toBe(200)
      expect((await post('/api/run-once', { body: { id } })).body.result).toEqual(done.body.result)
      expect(await executions('run-once', id)).toBe(1)
    })
  })

  describe('encryption keys on Postgres and Redis', () => {
    const [oldKey, newerKey] = [newKey(), newKey()]
    const plaintext = `secret-plan-${randomUUID()}`
    const keys = { plain: randomUUID(), sealedOld: randomUUID(), sealedNew: randomUUID() }
    const firstAnswers: Record<string, Answer> = {}
    let redis: Redis
    beforeAll(() => {
      redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
    })
    afterAll(() => redis?.quit())

    /** Empties the shared replay cache, so that the next replay is read from Postgres. */
    const clearRedis = async () => {
      const names = await redis.keys('idempotency:replay*')
      if (names.length) await redis.del(...names)
    }
    /** The shared replay cache's entries (in Redis) for an idempotency key. */
    const redisEntries = async (key: string) => {
      const names = await redis.keys('idempotency:replay*')
      const values = names.length ? await redis.mget(...names) : []
      return values.filter((value): value is string => value !== null && value.includes(key))
    }
    const withKeys = async (list: string, work: (instance: Instance) => Promise<void>) => {
      const instance = await start(postgresEnv({ NUXT_IDEMPOTENCY_ENCRYPTION_KEYS: list }))
      try {
        await work(instance)
      }
      finally {
        await instance.stop()
      }
    }
    const subscribe = (instance: Instance, key: string) => send(`${instance.url}/api/subscriptions`, { key, body: { plan: plaintext } })
    const expectReplay = (answer: Answer, first: Answer) => {
      expect({ status: answer.status, body: answer.body, location: answer.headers.get('location'), replayed: replayed(answer) })
        .toEqual({ status: first.status, body: first.body, location: first.headers.get('location'), replayed: true })
    }

    it('seals the stored body and headers in Postgres and the Redis entry; a replay answers them; a plain record stays readable', async () => {
      await withKeys('', async (instance) => {
        firstAnswers.plain = await subscribe(instance, keys.plain)
        expect(firstAnswers.plain.status).toBe(201)
      })
      await withKeys(oldKey, async (instance) => {
        const { records } = client(() => instance)
        const first = firstAnswers.sealedOld = await subscribe(instance, keys.sealedOld)
        expect({ status: first.status, plan: first.body.plan }).toEqual({ status: 201, plan: plaintext })
        const [record] = await records(keys.sealedOld)
        expect(record!.responseStatus).toBe(201)
        expect(record!.body).not.toContain(plaintext)
        expect(record!.body).not.toContain('/api/subscriptions/')
        expect(record!.body).toContain('"nuxt-idempotency:sealed"')
        expect(record!.headers).toBe('{}')
        await pollUntil('the replay is in Redis', async () => (await redisEntries(keys.sealedOld)).length === 1)
        expect((await redisEntries(keys.sealedOld))[0]).not.toContain(plaintext)
        expectReplay(await subscribe(instance, keys.sealedOld), first)
        // Stored before encryption was turned on: still answered.
        expectReplay(await subscribe(instance, keys.plain), firstAnswers.plain!)
      })
    })

    it('after rotating (the new key first, the old one kept) replays still work, from Redis and from Postgres', async () => {
      await withKeys(`${newerKey},${oldKey}`, async (instance) => {
        expectReplay(await subscribe(instance, keys.sealedOld), firstAnswers.sealedOld!)
        // Without the Redis entry the record in Postgres answers.
        await clearRedis()
        const fresh = await start(postgresEnv({ NUXT_IDEMPOTENCY_ENCRYPTION_KEYS: `${newerKey},${oldKey}` }))
        expectReplay(await subscribe(fresh, keys.sealedOld), firstAnswers.sealedOld!)
        await fresh.stop()
        firstAnswers.sealedNew = await subscribe(instance, keys.sealedNew)
        expect(firstAnswers.sealedNew.status).toBe(201)
        const [oldRecord, newRecord] = [(await client(() => instance).records(keys.sealedOld))[0]!, (await client(() => instance).records(keys.sealedNew))[0]!]
        // Sealed under different keys: the key id stored beside each ciphertext differs.
        const kid = (record: StoredRecord) => (JSON.parse(record.body!) as { kid: string }).kid
        expect(kid(oldRecord)).not.toBe(kid(newRecord))
      })
    })

    it('with the old key removed: 500 stored-response-unreadable, nothing runs again; records under the new key replay', async () => {
      // The replays above put the record in Redis again (sealed under the newer key): Postgres must answer here.
      await clearRedis()
      await withKeys(newerKey, async (instance) => {
        const { executions } = client(() => instance)
        const unreadable = await subscribe(instance, keys.sealedOld)
        expectProblem(unreadable, 500, 'stored-response-unreadable')
        expect(unreadable.body.detail).toContain('NUXT_IDEMPOTENCY_ENCRYPTION_KEYS')
        expect(await executions('subscriptions', keys.sealedOld)).toBe(0)
        expectReplay(await subscribe(instance, keys.sealedNew), firstAnswers.sealedNew!)
      })
    })
  })

  describe('on embedded PGlite', () => {
    let instance: Instance
    let dataRoot = ''
    beforeAll(async () => {
      dataRoot = await mkdtemp(join(process.env.APP_BUILD_ROOT ?? tmpdir(), 'nuxt-idempotency-options-pglite-'))
      instance = await start({ DATABASE_URL: '', REDIS_URL: '', NUXT_IDEMPOTENCY_PGLITE_DIR: join(dataRoot, 'idempotency'), NUXT_IDEMPOTENCY_ENCRYPTION_KEYS: '' })
    }, 120_000)
    afterAll(async () => {
      await instance?.stop()
      await rm(dataRoot, { recursive: true, force: true })
    }, 60_000)

    sharedCases(() => instance, { recordsOf: true })
  })
})
