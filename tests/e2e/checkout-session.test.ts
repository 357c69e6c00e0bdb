import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll, testSecrets } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import {
  countRows,
  expectCreatedOrder,
  expectProblem,
  newIdempotencyKey,
  type OrderBody,
  postOrder,
  type TenantCredentials,
  validOrderBody,
} from '../support/orders'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// docs/checkout-page.md: the checkout page orders without a pasted key, through a sealed session
// cookie bound to the demo tenant; that cookie names no other tenant, cannot be forged, and is
// worthless where the demo is off. Against the built server on real Postgres and Redis.

const DEMO_TENANT_ID = 'ten_demo_store'
const SESSION_COOKIE = 'ic_checkout'
const dayMs = 24 * 60 * 60 * 1000

interface SessionCookie {
  /** `ic_checkout=<sealed value>`, as a browser sends it back in `Cookie`. */
  pair: string
  value: string
  /** The Set-Cookie attributes after the pair, lower-cased names → values ('' for flags). */
  attributes: Map<string, string>
}

/** The one ic_checkout Set-Cookie of a response, parsed; fails when there is none or several. */
function sessionCookieOf(response: TestResponse): SessionCookie {
  const setCookies = response.headers.getSetCookie().filter(header => header.startsWith(`${SESSION_COOKIE}=`))
  expect(setCookies, `Set-Cookie headers: ${JSON.stringify(response.headers.getSetCookie())}`).toHaveLength(1)
  const [pair, ...attributes] = setCookies[0]!.split(';').map(part => part.trim())
  return {
    pair: pair!,
    value: pair!.slice(SESSION_COOKIE.length + 1),
    attributes: new Map(attributes.map((attribute) => {
      const [name, ...value] = attribute.split('=')
      return [name!.toLowerCase(), value.join('=')]
    })),
  }
}

/** The sealed value with one character of its encrypted part changed: the HMAC no longer matches. */
function tampered(value: string): string {
  // iron seal: Fe26.2*<password id>*<salt>*<iv>*<encrypted>*<expiry>*<hmac salt>*<hmac>
  const parts = value.split('*')
  expect(parts, value).toHaveLength(8)
  const encrypted = parts[4]!
  const at = Math.floor(encrypted.length / 2)
  parts[4] = encrypted.slice(0, at) + (encrypted[at] === 'A' ? 'B' : 'A') + encrypted.slice(at + 1)
  return parts.join('*')
}

/** An order the demo store's page would send: catalogue items, in IDR, on a fresh cart. */
function demoOrderBody(): OrderBody {
  return validOrderBody({
    amount: 149_000 + 2 * 89_000,
    paymentMethod: 'ewallet',
    items: [{ sku: 'TEE-ORGANIC', quantity: 1, unitPrice: 149_000 }, { sku: 'MUG-ENAMEL', quantity: 2, unitPrice: 89_000 }],
  })
}

describeWithServices('checkout session cookie', ['postgres', 'redis'], () => {
  // The other apps of this file (demo off, another password, failed starts) share this database.
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  /** The app under test (demo on) and a client on its database for reading rows. */
  let stack: { app: AppProcess, sql: postgres.Sql }
  /** Another tenant on the same app, with a secret key (from POST /api/ops/tenants). */
  let tenantB: TenantCredentials
  /** A valid demo session of stack.app, as the page gets it. */
  let demoCookie: string

  beforeAll(async () => {
    database = await createTestDatabase('checkout-session')
    const app = await startApp({ databaseUrl: database.url, redisUrl, label: 'checkout-session', env: { CHECKOUT_DEMO_ENABLED: 'true' } })
    stack = { app, sql: postgres(database.url, { max: 2, onnotice: () => {} }) }
    tenantB = await createTenant(app.url, 'checkout-session tenant B')
    const started = await startSession(app.url)
    expect(started.status, started.text).toBe(200)
    demoCookie = sessionCookieOf(started).pair
  })

  afterAll(async () => {
    await stack?.sql.end()
    await stopAll()
    await database?.drop()
  })

  function startSession(baseUrl: string, headers: Record<string, string> = {}): Promise<TestResponse> {
    return request(baseUrl, '/api/checkout/session', { headers })
  }

  /** POST /api/orders with exactly the given credentials headers (cookie and/or authorization). */
  function postWith(credentials: Record<string, string>, key: string, body: unknown, baseUrl = stack.app.url): Promise<TestResponse> {
    return request(baseUrl, '/api/orders', { method: 'POST', headers: { 'idempotency-key': key, ...credentials }, body })
  }

  function getWith(credentials: Record<string, string>, id: string, baseUrl = stack.app.url): Promise<TestResponse> {
    return request(baseUrl, `/api/orders/${id}`, { headers: credentials })
  }

  const cookie = (pair: string) => ({ cookie: pair })
  const bearer = (secretKey: string) => ({ authorization: `Bearer ${secretKey}` })

  async function orderRow(id: string): Promise<{ tenantId: string, idempotencyKey: string } | undefined> {
    const [row] = await stack.sql<Array<{ tenantId: string, idempotencyKey: string }>>`
      select tenant_id as "tenantId", idempotency_key as "idempotencyKey" from orders where id = ${id}`
    return row
  }

  async function scopesOfKey(key: string): Promise<string[]> {
    const rows = await stack.sql<Array<{ scope: string }>>`select scope from idempotency_records where key = ${key} order by scope`
    return rows.map(row => row.scope)
  }

  describe('GET /api/checkout/session', () => {
    it('answers 200 with the demo store and sets a sealed HttpOnly, SameSite=Strict, Secure, Path=/ cookie with Max-Age, even over plain http', async () => {
      const sentAt = Date.now()
      const response = await startSession(stack.app.url)
      const answeredAt = Date.now()

      expect(response.status, response.text).toBe(200)
      expect(response.headers.get('content-type')).toMatch(/^application\/json\b/)
      expect(response.json).toEqual({
        tenant: { id: DEMO_TENANT_ID, name: 'Demo store' },
        currency: 'IDR',
        // What each item has available, as the store first counts it (no order yet).
        catalogue: [
          { sku: 'TEE-ORGANIC', name: 'Organic cotton tee', description: 'Heavyweight, garment-dyed, made to last.', unitPrice: 149_000, available: 50 },
          { sku: 'MUG-ENAMEL', name: 'Enamel camp mug', description: 'Chip-resistant, 350 ml, stacks neatly.', unitPrice: 89_000, available: 50 },
          { sku: 'TOTE-CANVAS', name: 'Canvas tote', description: 'Waxed canvas with an inside pocket.', unitPrice: 119_000, available: 3 },
          { sku: 'CAP-WOOL', name: 'Wool cap', description: 'Merino blend, one size fits most.', unitPrice: 99_000, available: 20 },
        ],
        // The test environment sets FAULTS_ENABLED=true and MOCKPAY_ENABLED=true.
        mockpay: true,
        faults: true,
      })

      const session = sessionCookieOf(response)
      // Sealed (iron), not a readable tenant id the client could edit.
      expect(session.value).toMatch(/^Fe26\.2\*/)
      expect(session.value).not.toContain(DEMO_TENANT_ID)
      expect(session.attributes.get('httponly')).toBe('')
      expect(session.attributes.get('samesite')).toBe('Strict')
      expect(session.attributes.get('path')).toBe('/')
      // h3 sessions express the 24 h lifetime as Expires (created + maxAge), not as Max-Age; the seal expires with it.
      const expires = Date.parse(session.attributes.get('expires') ?? '')
      expect(expires).toBeGreaterThanOrEqual(sentAt - 1_000 + dayMs) // Expires has whole seconds
      expect(expires).toBeLessThanOrEqual(answeredAt + dayMs)
      // Exactly these: Secure although this request came over plain http (a TLS-terminating proxy
      // may not say so; browsers keep it from http://127.0.0.1), no Domain (host-only).
      expect(session.attributes.get('secure')).toBe('')
      expect([...session.attributes.keys()].sort()).toEqual(['expires', 'httponly', 'path', 'samesite', 'secure'])
    })

    it('creates the demo tenant row once however often sessions start, with no secret key', async () => {
      const fresh = await startSession(stack.app.url)
      const reload = await startSession(stack.app.url, cookie(sessionCookieOf(fresh).pair))

      expect(fresh.status).toBe(200)
      expect(reload.status, reload.text).toBe(200)
      expect(reload.json.tenant).toEqual({ id: DEMO_TENANT_ID, name: 'Demo store' })
      const rows = await stack.sql`select id, name from tenants where id = ${DEMO_TENANT_ID}`
      expect(rows).toEqual([{ id: DEMO_TENANT_ID, name: 'Demo store' }])
      const [{ keys }] = await stack.sql<[{ keys: number }]>`select count(*)::int as keys from api_keys where tenant_id = ${DEMO_TENANT_ID}`
      expect(keys).toBe(0)
    })

    it('counts the catalogue\'s stock once: an order\'s reservation stands when the store opens again, on this app or another on the same database (a restart)', async () => {
      const placed = await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody())
      expect(placed.status, placed.text).toBe(201)
      const restarted = await startApp({ databaseUrl: database.url, redisUrl, label: 'checkout-session-restart', env: { CHECKOUT_DEMO_ENABLED: 'true' } })
      try {
        for (const url of [stack.app.url, restarted.url]) {
          const opened = await startSession(url)
          expect(opened.status, opened.text).toBe(200)
          // 1 tee and 2 mugs held by the order; the tote and the cap as first counted.
          expect(opened.json.catalogue.map(({ sku, available }: { sku: string, available: number }) => [sku, available]))
            .toEqual([['TEE-ORGANIC', 49], ['MUG-ENAMEL', 48], ['TOTE-CANVAS', 3], ['CAP-WOOL', 20]])
        }
      }
      finally {
        await restarted.stop()
      }
      const counts = await stack.sql`select sku, on_hand::int as "onHand", (select count(*)::int from stock_movements m where m.tenant_id = s.tenant_id and m.sku = s.sku and m.kind = 'set') as sets
        from stock s where tenant_id = ${DEMO_TENANT_ID} order by sku`
      expect(counts).toEqual([
        { sku: 'CAP-WOOL', onHand: 20, sets: 1 },
        { sku: 'MUG-ENAMEL', onHand: 50, sets: 1 },
        { sku: 'TEE-ORGANIC', onHand: 50, sets: 1 },
        { sku: 'TOTE-CANVAS', onHand: 3, sets: 1 },
      ])
    })
  })

  describe('orders with the session cookie and no Authorization', () => {
    it('creates the order for the demo tenant: 201, tenant ten_demo_store, idempotency scope tenant:ten_demo_store', async () => {
      const before = await countRows(stack.sql)
      const key = newIdempotencyKey()
      const body = demoOrderBody()

      const created = await postWith(cookie(demoCookie), key, body)

      expectCreatedOrder(created, body, key, false)
      expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + 1, idempotencyRecords: before.idempotencyRecords + 1 })
      expect(await orderRow(created.json.id)).toEqual({ tenantId: DEMO_TENANT_ID, idempotencyKey: key })
      expect(await scopesOfKey(key)).toEqual([`tenant:${DEMO_TENANT_ID}`])
    })

    it('replays the same key and body sent with the cookie: 201 replayed, same order, nothing written', async () => {
      const key = newIdempotencyKey()
      const body = demoOrderBody()
      const first = await postWith(cookie(demoCookie), key, body)
      expectCreatedOrder(first, body, key, false)
      const before = await countRows(stack.sql)

      const replay = await postWith(cookie(demoCookie), key, body)

      expectCreatedOrder(replay, body, key, true)
      expect(replay.text).toBe(first.text.replace('"replayed":false', '"replayed":true'))
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it('answers GET /api/orders/:id with the cookie: 200, the order with its items, the stock they hold, and paymentIntentId null (no worker runs)', async () => {
      const body = demoOrderBody()
      const created = await postWith(cookie(demoCookie), newIdempotencyKey(), body)
      expect(created.status, created.text).toBe(201)

      const fetched = await getWith(cookie(demoCookie), created.json.id)

      expect(fetched.status, fetched.text).toBe(200)
      const { idempotency: _, ...order } = created.json
      // The demo store counts its stock: the order holds its units, by SKU.
      const reservations = [{ sku: 'MUG-ENAMEL', quantity: 2, status: 'reserved' }, { sku: 'TEE-ORGANIC', quantity: 1, status: 'reserved' }]
      expect(fetched.json).toEqual({ ...order, paymentIntentId: null, payment: null, cancelReason: null, amountRefunded: 0, refunds: [], reservations })
      // The checkout page lists these as the placed order's items.
      expect(fetched.json.items).toEqual(body.items)
    })
  })

  describe('isolation from other tenants', () => {
    it('does not let the demo cookie read another tenant\'s order, nor that tenant\'s key read a demo order (404 both ways)', async () => {
      const ofB = await postOrder(stack.app.url, { secretKey: tenantB.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
      const ofDemo = await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody())
      expect(ofB.status, ofB.text).toBe(201)
      expect(ofDemo.status, ofDemo.text).toBe(201)

      expectProblem(await getWith(cookie(demoCookie), ofB.json.id), 'not-found')
      expectProblem(await getWith(bearer(tenantB.secretKey), ofDemo.json.id), 'not-found')
      // Each still reads its own.
      expect((await getWith(cookie(demoCookie), ofDemo.json.id)).status).toBe(200)
      expect((await getWith(bearer(tenantB.secretKey), ofB.json.id)).status).toBe(200)
    })

    it('keeps the same Idempotency-Key and body from tenant B (bearer) and the demo session as two independent orders', async () => {
      const key = newIdempotencyKey()
      const body = demoOrderBody()
      const before = await countRows(stack.sql)

      const inB = await postWith(bearer(tenantB.secretKey), key, body)
      const inDemo = await postWith(cookie(demoCookie), key, body)

      // Neither is a replay of the other: each tenant executed its own key.
      expectCreatedOrder(inB, body, key, false)
      expectCreatedOrder(inDemo, body, key, false)
      expect(inDemo.json.id).not.toBe(inB.json.id)
      expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + 2, idempotencyRecords: before.idempotencyRecords + 2 })
      expect(await orderRow(inB.json.id)).toEqual({ tenantId: tenantB.tenantId, idempotencyKey: key })
      expect(await orderRow(inDemo.json.id)).toEqual({ tenantId: DEMO_TENANT_ID, idempotencyKey: key })
      expect(await scopesOfKey(key)).toEqual([`tenant:${DEMO_TENANT_ID}`, `tenant:${tenantB.tenantId}`].sort())
      expectProblem(await getWith(cookie(demoCookie), inB.json.id), 'not-found')
      expectProblem(await getWith(bearer(tenantB.secretKey), inDemo.json.id), 'not-found')
    })

    it('lets a bearer key win over the cookie when both are sent: the order is the key\'s tenant\'s', async () => {
      const key = newIdempotencyKey()
      const body = demoOrderBody()

      const created = await postWith({ ...bearer(tenantB.secretKey), ...cookie(demoCookie) }, key, body)

      expectCreatedOrder(created, body, key, false)
      expect(await orderRow(created.json.id)).toEqual({ tenantId: tenantB.tenantId, idempotencyKey: key })
      expect(await scopesOfKey(key)).toEqual([`tenant:${tenantB.tenantId}`])
      expectProblem(await getWith(cookie(demoCookie), created.json.id), 'not-found')
    })

    it('does not fall back to the cookie when the bearer key is unknown: 401, nothing written', async () => {
      const before = await countRows(stack.sql)

      const response = await postWith({ authorization: 'Bearer sk_unknown_0123456789abcdefghij', ...cookie(demoCookie) }, newIdempotencyKey(), demoOrderBody())

      expectProblem(response, 'unauthorized')
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })

  describe('cancel and refund with the session cookie', () => {
    const cancelWith = (credentials: Record<string, string>, id: string) =>
      request(stack.app.url, `/api/orders/${id}/cancel`, { method: 'POST', headers: { 'idempotency-key': newIdempotencyKey(), ...credentials } })

    it('cancels an order only with the session that placed it: another session gets 404, the placing one 200 canceled', async () => {
      const created = await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody())
      expect(created.status, created.text).toBe(201)
      const otherSession = sessionCookieOf(await startSession(stack.app.url)).pair
      expectProblem(await cancelWith(cookie(otherSession), created.json.id), 'not-found')
      expect((await getWith(cookie(demoCookie), created.json.id)).json.status).toBe('pending_payment')

      const canceled = await cancelWith(cookie(demoCookie), created.json.id)
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json).toMatchObject({ id: created.json.id, status: 'canceled', cancelReason: 'requested', amountRefunded: 0, refunds: [] })
    })

    it('never refunds with the session: a refund is the shop\'s act (401), and nothing is written', async () => {
      const created = await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody())
      const refused = await request(stack.app.url, `/api/orders/${created.json.id}/refunds`, { method: 'POST', headers: { 'idempotency-key': newIdempotencyKey(), ...cookie(demoCookie) }, body: {} })
      expectProblem(refused, 'unauthorized')
      expect(await stack.sql`select count(*)::int as n from refunds where order_id = ${created.json.id}`).toEqual([{ n: 0 }])
    })
  })

  describe('cookies that are not a valid session', () => {
    const invalidCredentials: Array<[string, () => Record<string, string>]> = [
      ['a tampered cookie value', () => cookie(`${SESSION_COOKIE}=${tampered(demoCookie.slice(SESSION_COOKIE.length + 1))}`)],
      ['an unsealed cookie naming the demo tenant', () => cookie(`${SESSION_COOKIE}=${encodeURIComponent(JSON.stringify({ tenantId: DEMO_TENANT_ID }))}`)],
      ['no cookie at all', () => ({})],
    ]

    it.each(invalidCredentials)('answers POST /api/orders with %s 401 unauthorized and writes nothing', async (_, credentials) => {
      const before = await countRows(stack.sql)

      const response = await postWith(credentials(), newIdempotencyKey(), demoOrderBody())

      expectProblem(response, 'unauthorized')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    describe('sealed with another SESSION_PASSWORD', () => {
      let otherApp: AppProcess
      let otherCookie: string

      beforeAll(async () => {
        // Same database, demo on, another password: its cookies are well-formed seals the first app cannot open.
        otherApp = await startApp({
          databaseUrl: database.url,
          redisUrl,
          label: 'checkout-session-other-password',
          env: { CHECKOUT_DEMO_ENABLED: 'true', SESSION_PASSWORD: `${testSecrets.sessionPassword}-but-another-one` },
        })
        const started = await startSession(otherApp.url)
        expect(started.status, started.text).toBe(200)
        otherCookie = sessionCookieOf(started).pair
      })

      afterAll(async () => {
        await otherApp?.stop()
      })

      it('answers 401 unauthorized to a cookie of the other app, writes nothing, and the cookie works where it was sealed', async () => {
        const before = await countRows(stack.sql)

        expectProblem(await postWith(cookie(otherCookie), newIdempotencyKey(), demoOrderBody()), 'unauthorized')
        expectProblem(await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody(), otherApp.url), 'unauthorized')
        expect(await countRows(stack.sql)).toEqual(before)

        // The rejected cookie is a genuine session: its own app accepts it.
        const body = demoOrderBody()
        const key = newIdempotencyKey()
        expectCreatedOrder(await postWith(cookie(otherCookie), key, body, otherApp.url), body, key, false)
        expect(await scopesOfKey(key)).toEqual([`tenant:${DEMO_TENANT_ID}`])
      })
    })
  })

  describe('CHECKOUT_DEMO_ENABLED=false', () => {
    let demoOff: AppProcess

    beforeAll(async () => {
      // Same database and the same SESSION_PASSWORD: the demo cookie would open here if it were accepted.
      demoOff = await startApp({ databaseUrl: database.url, redisUrl, label: 'checkout-session-demo-off', env: { CHECKOUT_DEMO_ENABLED: 'false' } })
    })

    afterAll(async () => {
      await demoOff?.stop()
    })

    it('answers GET /api/checkout/session 404 not-found and sets no cookie', async () => {
      const response = await startSession(demoOff.url)

      expectProblem(response, 'not-found')
      expect(response.headers.getSetCookie()).toEqual([])
    })

    it('does not accept a valid demo cookie: 401 on POST (nothing written) and on GET', async () => {
      const created = await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody())
      expect(created.status, created.text).toBe(201)
      const before = await countRows(stack.sql)

      expectProblem(await postWith(cookie(demoCookie), newIdempotencyKey(), demoOrderBody(), demoOff.url), 'unauthorized')
      expectProblem(await getWith(cookie(demoCookie), created.json.id, demoOff.url), 'unauthorized')
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })

  describe('start-up', () => {
    it('exits 1 naming SESSION_PASSWORD when the demo is on with DATABASE_URL and no password is set', async () => {
      const start = startApp({
        databaseUrl: database.url,
        redisUrl,
        label: 'checkout-session-no-password',
        // Empty means unset: it overrides the test default.
        env: { CHECKOUT_DEMO_ENABLED: 'true', SESSION_PASSWORD: '' },
      })
      await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*\n {2}SESSION_PASSWORD: missing — .*required because CHECKOUT_DEMO_ENABLED=true with DATABASE_URL/)
    })

    it('exits 1 naming SESSION_PASSWORD when it is shorter than 32 characters', async () => {
      const start = startApp({
        databaseUrl: database.url,
        redisUrl,
        label: 'checkout-session-short-password',
        env: { CHECKOUT_DEMO_ENABLED: 'true', SESSION_PASSWORD: 'x'.repeat(31) },
      })
      await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*SESSION_PASSWORD: must be at least 32 characters/)
    })
  })
})
