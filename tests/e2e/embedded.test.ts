import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll } from '../support/app'
import { createTenant, request } from '../support/http'
import { expectProblem, orderBodyVariant, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'

// The embedded default (SPEC §1): no DATABASE_URL and no REDIS_URL, so PGlite under PGLITE_DIR and
// in-process locks. The same directory must survive a restart with its records intact.

describe('embedded mode: PGlite and in-process locks', () => {
  let pgliteDir: string
  let app: AppProcess
  let tenant: TenantCredentials
  const order = { key: `embedded-${randomUUID()}`, body: validOrderBody() }
  const { cartId } = order.body
  let orderId: string

  // PGlite takes a few seconds to boot and migrate; startApp waits up to 60 s for /api/ready.
  const startEmbedded = () => startApp({ redisUrl: null, label: 'embedded', env: { PGLITE_DIR: pgliteDir } })

  beforeAll(async () => {
    pgliteDir = await mkdtemp(join(tmpdir(), 'ic-embedded-'))
    app = await startEmbedded()
  })

  afterAll(async () => {
    await stopAll()
    if (pgliteDir) await rm(pgliteDir, { recursive: true, force: true })
  })

  it('is ready on PGlite with the in-process lock backend', async () => {
    const ready = await request(app.url, '/api/ready')
    expect(ready.status).toBe(200)
    expect(ready.json).toEqual({ status: 'ready', database: true, locks: { backend: 'memory', reachable: true } })
  })

  it('creates a tenant and an order, replays it, and rejects the key with another body', async () => {
    tenant = await createTenant(app.url, 'embedded')
    const send = (body: unknown) => postOrder(app.url, { secretKey: tenant.secretKey, key: order.key, body })

    const created = await send(order.body)
    expect(created.status).toBe(201)
    expect(created.json).toMatchObject({ object: 'order', status: 'pending_payment', cartId, idempotency: { key: order.key, replayed: false } })
    orderId = created.json.id
    expect(orderId).toMatch(/^ord_/)
    expect(created.headers.get('location')).toBe(`/api/orders/${orderId}`)

    const replayed = await send(order.body)
    expect(replayed.status).toBe(201)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(replayed.json).toEqual({ ...created.json, idempotency: { key: order.key, replayed: true } })

    expectProblem(await send(orderBodyVariant(1, { cartId })), 'idempotency-key-reused')
  })

  it('keeps the order and its idempotency record across a restart on the same PGLITE_DIR', async () => {
    expect(orderId).toBeDefined()
    await app.stop()
    expect(await app.exited).toBe(0)
    app = await startEmbedded()

    const replayed = await postOrder(app.url, { secretKey: tenant.secretKey, ...order })
    expect(replayed.status).toBe(201)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(replayed.json).toMatchObject({ id: orderId, cartId, idempotency: { key: order.key, replayed: true } })

    const fetched = await request(app.url, `/api/orders/${orderId}`, { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    expect(fetched.status).toBe(200)
    expect(fetched.json).toMatchObject({ id: orderId, object: 'order', cartId })

    // The cart's uniqueness survived too: a new key for the same cart is told which order exists.
    const sameCartNewKey = await postOrder(app.url, { secretKey: tenant.secretKey, key: `embedded-${randomUUID()}`, body: order.body })
    expectProblem(sameCartNewKey, 'cart-already-ordered')
    expect(sameCartNewKey.json.orderId).toBe(orderId)
  })
})
