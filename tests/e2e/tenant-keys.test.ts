import { createHash } from 'node:crypto'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll, testSecrets } from '../support/app'
import { request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { countRows, expectProblem, newIdempotencyKey, postOrder, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { projectRoot, spawnManaged } from '../support/processes'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// Key rotation (docs/api.md#tenants-and-keys): operators issue, list and revoke a tenant's secret
// keys; several keys are live at once; a revoked key is refused at once by the instance that
// revoked it and within the key cache's period (10 s) by the others; each change leaves one
// operator_actions row. Two built instances on one real Postgres database and Redis.

interface OperatorActionRow {
  action: string
  tenantId: string
  subjectId: string
  requestId: string | null
  detail: Record<string, unknown>
}

interface IssuedKey { keyId: string, secretKey: string }

const KEY_ID_PATTERN = /^key_[\w-]+$/
const keyPrefixOf = (secretKey: string) => secretKey.slice(0, 10)
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')
const isoTimestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
/** How long another instance may still accept a revoked key: the key cache's 10 s, plus slack. */
const REVOCATION_BOUND_MS = 12_000

describeWithServices('tenant secret keys: issue, list, revoke', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let sql: postgres.Sql
  /** Serves the ops requests (and so evicts revoked keys from its own cache). */
  let instanceA: AppProcess
  /** Another instance on the same database: it only learns of a revocation when its cache entry expires. */
  let instanceB: AppProcess

  let tenantA: { tenantId: string, firstKey: IssuedKey }
  let secondKey: IssuedKey
  let unusedKey: IssuedKey
  /** An order of tenant A, read back to probe whether a key still authenticates (a GET writes nothing). */
  let orderOfA: string
  /** Every operator action the suite caused, in order, as its rows must read. */
  const expectedActions: OperatorActionRow[] = []

  beforeAll(async () => {
    database = await createTestDatabase('tenant-keys')
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    instanceA = await startApp({ databaseUrl: database.url, redisUrl, label: 'keys-a' })
    instanceB = await startApp({ databaseUrl: database.url, redisUrl, label: 'keys-b' })
    tenantA = await createTenantRecorded('keys tenant A')
  })

  afterAll(async () => {
    await sql?.end()
    await stopAll()
    await database?.drop()
  })

  /** The request's id as the server stored it: these requests send no X-Request-Id, so the response's is the server's. */
  const requestId = (response: TestResponse) => response.headers.get('x-request-id')!

  /** POST /api/ops/tenants on instance A; its first key's id read from the database. */
  async function createTenantRecorded(name: string): Promise<{ tenantId: string, firstKey: IssuedKey }> {
    const response = await opsRequest(instanceA.url, '/api/ops/tenants', { method: 'POST', body: { name } })
    expect(response.status, response.text).toBe(201)
    expect(response.headers.get('cache-control')).toBe('no-store')
    const { tenant: { id: tenantId }, secretKey } = response.json as { tenant: { id: string }, secretKey: string }
    const [{ keyId }] = await sql<[{ keyId: string }]>`select id as "keyId" from api_keys where tenant_id = ${tenantId}`
    expectedActions.push({ action: 'tenant.created', tenantId, subjectId: tenantId, requestId: requestId(response), detail: { keyPrefix: keyPrefixOf(secretKey) } })
    return { tenantId, firstKey: { keyId, secretKey } }
  }

  const keysPath = (tenantId: string) => `/api/ops/tenants/${tenantId}/keys`
  const issue = (tenantId: string, options: { body?: unknown, headers?: Record<string, string> } = {}) =>
    opsRequest(instanceA.url, keysPath(tenantId), { method: 'POST', headers: options.headers, body: options.body })
  const list = (tenantId: string) => opsRequest(instanceA.url, keysPath(tenantId))
  const revoke = (tenantId: string, keyId: string) =>
    opsRequest(instanceA.url, `${keysPath(tenantId)}/${keyId}`, { method: 'DELETE' })

  /** A 201 of the keys route: exactly {object, keyId, secretKey, createdAt}, recorded as an expected action. */
  function expectIssued(response: TestResponse, tenantId: string): IssuedKey {
    expect(response.status, response.text).toBe(201)
    expect(response.headers.get('content-type')).toMatch(/^application\/json\b/)
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(response.json).toEqual({
      object: 'api_key',
      keyId: expect.stringMatching(KEY_ID_PATTERN),
      secretKey: expect.stringMatching(/^sk_[\w-]{32}$/),
      createdAt: isoTimestamp,
    })
    expect(Object.keys(response.json)).toEqual(['object', 'keyId', 'secretKey', 'createdAt'])
    const { keyId, secretKey } = response.json as IssuedKey
    expectedActions.push({ action: 'api_key.created', tenantId, subjectId: keyId, requestId: requestId(response), detail: { keyPrefix: keyPrefixOf(secretKey) } })
    return { keyId, secretKey }
  }

  interface KeyRow { tenantId: string, keyHash: string, keyPrefix: string, createdAt: Date, lastUsedAt: Date | null, revokedAt: Date | null }
  async function keyRow(keyId: string): Promise<KeyRow | undefined> {
    const [row] = await sql<KeyRow[]>`
      select tenant_id as "tenantId", key_hash as "keyHash", key_prefix as "keyPrefix", created_at as "createdAt",
             last_used_at as "lastUsedAt", revoked_at as "revokedAt"
      from api_keys where id = ${keyId}`
    return row
  }

  /** Everything an operator request could change: keys (and their revocations), tenants, actions. */
  async function operatorState() {
    const [state] = await sql`
      select (select count(*)::int from api_keys) as keys,
             (select count(*)::int from api_keys where revoked_at is not null) as revoked,
             (select count(*)::int from tenants) as tenants,
             (select count(*)::int from operator_actions) as actions`
    return state
  }

  const getOrder = (app: AppProcess, secretKey: string) =>
    request(app.url, `/api/orders/${orderOfA}`, { headers: { authorization: `Bearer ${secretKey}` } })

  it.each<[string, () => Record<string, string>]>([
    ['no Authorization header', () => ({})],
    ['a wrong OPS token', () => ({ authorization: `Bearer ${testSecrets.opsToken}x` })],
    ['a tenant secret key', () => ({ authorization: `Bearer ${tenantA.firstKey.secretKey}` })],
  ])('answers all three key routes with %s 401 unauthorized and changes nothing', async (_, headers) => {
    const before = await operatorState()
    const path = keysPath(tenantA.tenantId)
    expectProblem(await request(instanceA.url, path, { method: 'POST', headers: headers() }), 'unauthorized')
    expectProblem(await request(instanceA.url, path, { headers: headers() }), 'unauthorized')
    expectProblem(await request(instanceA.url, `${path}/${tenantA.firstKey.keyId}`, { method: 'DELETE', headers: headers() }), 'unauthorized')
    expect(await operatorState()).toEqual(before)
  })

  it('issues a second key: 201 {object, keyId, secretKey, createdAt}, no-store, only its SHA-256 and prefix stored', async () => {
    const response = await issue(tenantA.tenantId)
    secondKey = expectIssued(response, tenantA.tenantId)
    expect(await keyRow(secondKey.keyId)).toEqual({
      tenantId: tenantA.tenantId,
      keyHash: sha256(secondKey.secretKey),
      keyPrefix: keyPrefixOf(secondKey.secretKey),
      createdAt: new Date(response.json.createdAt),
      lastUsedAt: null,
      revokedAt: null,
    })
    const [{ holding }] = await sql<[{ holding: number }]>`
      select (select count(*)::int from api_keys k where row_to_json(k)::text like ${`%${secondKey.secretKey}%`})
           + (select count(*)::int from operator_actions a where row_to_json(a)::text like ${`%${secondKey.secretKey}%`}) as holding`
    expect(holding).toBe(0)
  })

  it('accepts an empty JSON object as the body, and refuses any other body with nothing issued', async () => {
    unusedKey = expectIssued(await issue(tenantA.tenantId, { body: {} }), tenantA.tenantId)

    const before = await operatorState()
    const unknownField = await issue(tenantA.tenantId, { body: { name: 'ci' } })
    expectProblem(unknownField, 'validation-failed')
    expect(unknownField.json.errors).toEqual([{ path: '(body)', message: expect.any(String) }])
    expectProblem(await issue(tenantA.tenantId, { body: [] }), 'validation-failed')
    expectProblem(await issue(tenantA.tenantId, { body: '{"a":', headers: { 'content-type': 'application/json' } }), 'malformed-json')
    expectProblem(await issue(tenantA.tenantId, { body: 'new key please', headers: { 'content-type': 'text/plain' } }), 'unsupported-media-type')
    expect(await operatorState()).toEqual(before)
  })

  it('lets the first and the second key both create orders, on either instance', async () => {
    for (const app of [instanceA, instanceB]) {
      for (const { secretKey } of [tenantA.firstKey, secondKey]) {
        const created = await postOrder(app.url, { secretKey, key: newIdempotencyKey(), body: validOrderBody() })
        expect(created.status, created.text).toBe(201)
        orderOfA = created.json.id
      }
    }
  })

  it('lists the keys newest first as keyId, keyPrefix, createdAt, lastUsedAt, revokedAt, with lastUsedAt set once used and never a secret or hash', async () => {
    const usedKeys = [secondKey.keyId, tenantA.firstKey.keyId]
    let listing!: TestResponse
    // The last-used time is written in the background after the request that used the key.
    await pollUntil('both used keys show lastUsedAt', async () => {
      listing = await list(tenantA.tenantId)
      return listing.status === 200 && usedKeys.every(keyId => listing.json.data.find((key: { keyId: string }) => key.keyId === keyId)?.lastUsedAt)
    }, { timeoutMs: 5_000 })

    const createdAt = async (keyId: string) => (await keyRow(keyId))!.createdAt.toISOString()
    expect(listing.json).toEqual({
      object: 'list',
      data: [
        { keyId: unusedKey.keyId, keyPrefix: keyPrefixOf(unusedKey.secretKey), createdAt: await createdAt(unusedKey.keyId), lastUsedAt: null, revokedAt: null },
        { keyId: secondKey.keyId, keyPrefix: keyPrefixOf(secondKey.secretKey), createdAt: await createdAt(secondKey.keyId), lastUsedAt: isoTimestamp, revokedAt: null },
        { keyId: tenantA.firstKey.keyId, keyPrefix: keyPrefixOf(tenantA.firstKey.secretKey), createdAt: await createdAt(tenantA.firstKey.keyId), lastUsedAt: isoTimestamp, revokedAt: null },
      ],
    })
    for (const key of listing.json.data) expect(Object.keys(key)).toEqual(['keyId', 'keyPrefix', 'createdAt', 'lastUsedAt', 'revokedAt'])
    for (const { secretKey } of [tenantA.firstKey, secondKey, unusedKey]) {
      expect(listing.text).not.toContain(secretKey)
      expect(listing.text).not.toContain(sha256(secretKey))
    }
    expect(listing.text).not.toMatch(/secretKey|keyHash|key_hash/)
  })

  it('writes last_used_at when a key is read from the database, not again while this instance remembers it', async () => {
    const first = await getOrder(instanceA, unusedKey.secretKey)
    expect(first.status, first.text).toBe(200)
    await pollUntil('the key\'s last_used_at is written', async () => (await keyRow(unusedKey.keyId))!.lastUsedAt !== null, { timeoutMs: 3_000 })
    const lastUsedAt = (await keyRow(unusedKey.keyId))!.lastUsedAt

    // Well within the 10 s cache period of the first request: these are answered from the cache.
    for (let i = 0; i < 3; i++) expect((await getOrder(instanceA, unusedKey.secretKey)).status).toBe(200)
    await new Promise(resolve => setTimeout(resolve, 300))
    expect((await keyRow(unusedKey.keyId))!.lastUsedAt).toEqual(lastUsedAt)
  })

  it('revokes the first key: 204, refused at once by the revoking instance and within the cache period by the other, while the second key keeps working', async () => {
    // Both instances remember the key as valid right before it is revoked.
    expect((await getOrder(instanceA, tenantA.firstKey.secretKey)).status).toBe(200)
    expect((await getOrder(instanceB, tenantA.firstKey.secretKey)).status).toBe(200)

    const revoked = await revoke(tenantA.tenantId, tenantA.firstKey.keyId)
    const revokedAt = Date.now()
    expect(revoked.status, revoked.text).toBe(204)
    expect(revoked.text).toBe('')
    expectedActions.push({ action: 'api_key.revoked', tenantId: tenantA.tenantId, subjectId: tenantA.firstKey.keyId, requestId: requestId(revoked), detail: { keyPrefix: keyPrefixOf(tenantA.firstKey.secretKey) } })
    expect((await keyRow(tenantA.firstKey.keyId))!.revokedAt).toEqual(expect.any(Date))

    expectProblem(await getOrder(instanceA, tenantA.firstKey.secretKey), 'unauthorized')
    await pollUntil('the other instance refuses the revoked key', async () => (await getOrder(instanceB, tenantA.firstKey.secretKey)).status === 401, { timeoutMs: REVOCATION_BOUND_MS, intervalMs: 200 })
    expect(Date.now() - revokedAt).toBeLessThan(REVOCATION_BOUND_MS)

    const before = await countRows(sql)
    for (const app of [instanceA, instanceB]) {
      expectProblem(await postOrder(app.url, { secretKey: tenantA.firstKey.secretKey, key: newIdempotencyKey(), body: validOrderBody() }), 'unauthorized')
    }
    expect(await countRows(sql)).toEqual(before)
    for (const app of [instanceA, instanceB]) {
      const created = await postOrder(app.url, { secretKey: secondKey.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
      expect(created.status, created.text).toBe(201)
    }

    const listing = await list(tenantA.tenantId)
    const revokedEntry = listing.json.data.find((key: { keyId: string }) => key.keyId === tenantA.firstKey.keyId)
    expect(revokedEntry.revokedAt).toBe((await keyRow(tenantA.firstKey.keyId))!.revokedAt!.toISOString())
  })

  it('answers a second revocation 204 without moving revoked_at or recording anything', async () => {
    const { revokedAt } = (await keyRow(tenantA.firstKey.keyId))!
    const before = await operatorState()
    const again = await revoke(tenantA.tenantId, tenantA.firstKey.keyId)
    expect(again.status, again.text).toBe(204)
    expect(again.text).toBe('')
    expect((await keyRow(tenantA.firstKey.keyId))!.revokedAt).toEqual(revokedAt)
    expect(await operatorState()).toEqual(before)
  })

  it('answers 404 for another tenant\'s key, an unknown key or tenant and malformed ids, and changes nothing', async () => {
    const tenantB = await createTenantRecorded('keys tenant B')
    const before = await operatorState()

    const otherTenants = await revoke(tenantA.tenantId, tenantB.firstKey.keyId)
    expectProblem(otherTenants, 'not-found')
    expect(otherTenants.json.detail).toContain(`GET /api/ops/tenants/${tenantA.tenantId}/keys`)
    expect((await keyRow(tenantB.firstKey.keyId))!.revokedAt).toBeNull()
    expectProblem(await revoke(tenantA.tenantId, 'key_unknown'), 'not-found')
    expectProblem(await revoke(tenantA.tenantId, 'not-a-key-id'), 'not-found')

    for (const tenantId of ['ten_unknown', 'acme', `ten_${'x'.repeat(65)}`]) {
      for (const response of [await issue(tenantId), await list(tenantId), await revoke(tenantId, tenantA.firstKey.keyId)]) {
        expectProblem(response, 'not-found')
        expect(response.json.detail).toContain('POST /api/ops/tenants')
      }
    }
    expect(await operatorState()).toEqual(before)
    // Tenant B's key still authenticates after the attempt on it.
    const created = await postOrder(instanceA.url, { secretKey: tenantB.firstKey.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
  })

  it('records a tenant created from the CLI with no request id and detail via cli', async () => {
    const cli = spawnManaged({
      label: 'tenant-create',
      args: [`${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`, 'scripts/tenant-create.ts', 'keys', 'cli', 'tenant'],
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: database.url, LOG_LEVEL: 'warn' },
    })
    expect(await cli.exited, cli.output()).toBe(0)
    const tenantId = /"id": "(ten_[\w-]+)"/.exec(cli.output())?.[1]
    const secretKey = /"secretKey": "(sk_[\w-]+)"/.exec(cli.output())?.[1]
    expect({ tenantId, secretKey }, cli.output()).toEqual({ tenantId: expect.any(String), secretKey: expect.any(String) })
    expectedActions.push({ action: 'tenant.created', tenantId: tenantId!, subjectId: tenantId!, requestId: null, detail: { keyPrefix: keyPrefixOf(secretKey!), via: 'cli' } })
  })

  it('kept exactly one operator action per tenant created, key issued and key revoked, with the requests\' ids and no secret', async () => {
    const rows = await sql<OperatorActionRow[]>`
      select action, tenant_id as "tenantId", subject_id as "subjectId", request_id as "requestId", detail
      from operator_actions order by id`
    expect(rows).toEqual(expectedActions)
    expect(expectedActions.map(action => action.action)).toEqual([
      'tenant.created', 'api_key.created', 'api_key.created', 'api_key.revoked', 'tenant.created', 'tenant.created',
    ])
    const [{ text }] = await sql<[{ text: string }]>`select coalesce(string_agg(row_to_json(a)::text, ''), '') as text from operator_actions a`
    expect(text).not.toMatch(/sk_[\w-]{20}/)
  })
})
