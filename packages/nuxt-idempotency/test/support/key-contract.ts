import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { setup, url } from '@nuxt/test-utils/e2e'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Answer, counts, executionsOf, pollUntil, send, type SendOptions } from './http'
import { fixtureBuildDir } from './services'

/**
 * The key contract of `defineIdempotentEventHandler` and the webhook handler, row by row, against
 * the `subscriptions` fixture built from the module's source. The same suite runs on each backend:
 * embedded PGlite with in-process locks, and Postgres with Redis.
 */

export const subscriptionsFixture = fileURLToPath(new URL('../fixtures/subscriptions', import.meta.url))

/** The build, migrations and first start of a Nuxt app take a while on two cores. */
export const SETUP_TIMEOUT_MS = 280_000

export interface Backend {
  /** Part of the build directory's name. */
  label: string
  /** The server's environment (besides the webhook secret and key prefix this suite adds). */
  env: Record<string, string>
  /** Runs before the fixture is built and started, e.g. to create its database. */
  before?: () => Promise<void>
  /** Runs after the server stopped. */
  after?: () => Promise<void>
  /** Why the suite cannot run here (a service is down); it is then skipped. */
  skipBecause?: string
}

export function webhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`
}

/** A Standard Webhooks delivery of `payload` under `webhookId`, signed with `secret` at `at`. */
export function signedDelivery(secret: string, webhookId: string, payload: string, at = new Date()): SendOptions {
  const signature = new Webhook(secret).sign(webhookId, at, payload)
  return {
    body: payload,
    headers: {
      'webhook-id': webhookId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
    },
  }
}

/**
 * A Midtrans notification of `orderId` (IDR 150,000) in `status`, signed with `serverKey` as
 * Midtrans signs it (SHA-512 of order_id, status_code, gross_amount and the key: computed here, not
 * by the module), with `extra` fields (refund_amount, refunds, …).
 */
export function midtransNotification(serverKey: string, orderId: string, status: string, extra: Record<string, unknown> = {}): SendOptions {
  const statusCode = status === 'pending' ? '201' : '200'
  const grossAmount = '150000.00'
  const signature = createHash('sha512').update(`${orderId}${statusCode}${grossAmount}${serverKey}`).digest('hex')
  return {
    body: JSON.stringify({
      transaction_time: '2026-12-05 10:00:00', transaction_status: status, transaction_id: randomUUID(), status_message: 'midtrans payment notification',
      status_code: statusCode, signature_key: signature, payment_type: 'gopay', order_id: orderId, merchant_id: 'G000000000', gross_amount: grossAmount,
      fraud_status: 'accept', currency: 'IDR', ...extra,
    }),
    headers: { 'content-type': 'application/json' },
  }
}

export function expectProblem(answer: Answer, status: number, slug: string): void {
  expect({ status: answer.status, body: answer.body }).toMatchObject({ status, body: { type: `/problems/${slug}`, status, title: expect.any(String) } })
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json\b/)
}

export function expectExecuted(answer: Answer, status = 201): void {
  expect(answer.status).toBe(status)
  expect(answer.headers.get('idempotent-replayed')).toBeNull()
}

/** A replay of `first`: same status, body and Location, marked Idempotent-Replayed. */
export function expectReplayOf(answer: Answer, first: Answer): void {
  expect({ status: answer.status, body: answer.body, location: answer.headers.get('location') })
    .toEqual({ status: first.status, body: first.body, location: first.headers.get('location') })
  expect(answer.headers.get('idempotent-replayed')).toBe('true')
}

/**
 * Copies of one request sent at once: exactly one executed; every other is a replay of it or, when
 * it arrived while the first ran, 409 request-in-progress with Retry-After. Returns the executed one.
 */
export function expectOneExecution(answers: Answer[]): Answer {
  const executed = answers.filter(answer => answer.status === 201 && answer.headers.get('idempotent-replayed') === null)
  expect(executed, JSON.stringify(answers.map(answer => [answer.status, answer.body]))).toHaveLength(1)
  for (const answer of answers) {
    if (answer === executed[0]) continue
    if (answer.status === 409) {
      expectProblem(answer, 409, 'request-in-progress')
      expect(answer.headers.get('retry-after')).toBe('1')
    }
    else expectReplayOf(answer, executed[0]!)
  }
  return executed[0]!
}

export function describeKeyContract(name: string, backend: Backend): void {
  describe.skipIf(backend.skipBecause !== undefined)(name, async () => {
    const secret = webhookSecret()
    const midtransServerKey = `SB-Mid-server-${randomBytes(12).toString('base64url')}`
    if (backend.before) beforeAll(backend.before, 60_000)
    await setup({
      rootDir: subscriptionsFixture,
      buildDir: fixtureBuildDir(`subscriptions-${backend.label}`),
      build: true,
      server: true,
      setupTimeout: SETUP_TIMEOUT_MS,
      env: {
        NODE_ENV: 'production',
        NUXT_WEBHOOK_SECRET: secret,
        NUXT_MIDTRANS_SERVER_KEY: midtransServerKey,
        // Shared Redis: this run's locks and cached replays apart from any other's.
        NUXT_IDEMPOTENCY_KEY_PREFIX: `test:${randomUUID()}:`,
        ...backend.env,
      },
    })
    if (backend.after) afterAll(backend.after, 60_000)

    const at = (path: string) => url(path)
    const post = (path: string, options: SendOptions) => send(at(path), options)
    const executions = async (route: string, key?: string) => executionsOf(await counts(at('/')), route, key)
    /**
     * Starts a request on the slow route and resolves once its handler runs, with the answer still
     * pending (wrapped: an async function returning a bare promise would wait for it).
     */
    const startSlow = async (key: string, body: unknown): Promise<{ answer: Promise<Answer> }> => {
      const answer = post('/api/slow', { key, body })
      // Awaited by the caller later; a failure meanwhile is not an unhandled rejection.
      answer.catch(() => {})
      await pollUntil(`the slow handler runs for key ${key}`, async () => (await counts(at('/'))).started[`slow ${key}`] === 1)
      return { answer }
    }

    describe('Idempotency-Key', () => {
      it('executes a first request: its status, body and Location, without Idempotent-Replayed', async () => {
        const key = randomUUID()
        const first = await post('/api/subscriptions', { key, body: { plan: 'pro' } })
        expectExecuted(first)
        expect(first.body).toEqual({ id: expect.stringMatching(/^sub_\d+$/), key, plan: 'pro', execution: 1 })
        expect(first.headers.get('location')).toBe(`/api/subscriptions/${first.body.id}`)
        expect(await executions('subscriptions', key)).toBe(1)
      })

      it('replays the same key with the same body: same status, body and Location, Idempotent-Replayed: true, no second execution', async () => {
        const key = randomUUID()
        const first = await post('/api/subscriptions', { key, body: { plan: 'pro' } })
        expectExecuted(first)
        const again = await post('/api/subscriptions', { key, body: { plan: 'pro' } })
        expectReplayOf(again, first)
        const third = await post('/api/subscriptions', { key, body: { plan: 'pro' } })
        expectReplayOf(third, first)
        expect(await executions('subscriptions', key)).toBe(1)
      })

      it('refuses the same key with another body: 422 idempotency-key-reused', async () => {
        const key = randomUUID()
        expectExecuted(await post('/api/subscriptions', { key, body: { plan: 'pro' } }))
        expectProblem(await post('/api/subscriptions', { key, body: { plan: 'team' } }), 422, 'idempotency-key-reused')
        expect(await executions('subscriptions', key)).toBe(1)
      })

      it('keeps each route\'s keys apart (the route is the default scope): the same key on another route runs there once', async () => {
        const key = randomUUID()
        expectExecuted(await post('/api/subscriptions', { key, body: { plan: 'pro' } }))
        const trial = await post('/api/trials', { key, body: { plan: 'pro' } })
        expect(trial.status).toBe(201)
        expect(trial.headers.get('idempotent-replayed')).toBeNull()
        expect((await post('/api/trials', { key, body: { plan: 'pro' } })).headers.get('idempotent-replayed')).toBe('true')
        expect(await executions('trials', key)).toBe(1)
        expect(await executions('subscriptions', key)).toBe(1)
      })

      it('refuses the same key with another query: 422 idempotency-key-reused', async () => {
        const key = randomUUID()
        expectExecuted(await post('/api/subscriptions', { key, body: { plan: 'pro' } }))
        expectProblem(await post('/api/subscriptions?coupon=spring', { key, body: { plan: 'pro' } }), 422, 'idempotency-key-reused')
        expect(await executions('subscriptions', key)).toBe(1)
      })

      it('answers a request without a key with 400 idempotency-key-missing, running nothing', async () => {
        const before = await executions('subscriptions')
        expectProblem(await post('/api/subscriptions', { body: { plan: 'pro' } }), 400, 'idempotency-key-missing')
        expect(await executions('subscriptions')).toBe(before)
      })

      it('answers an invalid key (a space, 256 characters) with 400 idempotency-key-invalid, running nothing', async () => {
        const before = await executions('subscriptions')
        expectProblem(await post('/api/subscriptions', { key: 'two words', body: { plan: 'pro' } }), 400, 'idempotency-key-invalid')
        expectProblem(await post('/api/subscriptions', { key: 'k'.repeat(256), body: { plan: 'pro' } }), 400, 'idempotency-key-invalid')
        expect(await executions('subscriptions')).toBe(before)
      })

      it('accepts a key of 255 visible characters', async () => {
        const key = `${randomUUID()}${'~'.repeat(255 - 36)}`
        const first = await post('/api/subscriptions', { key, body: { plan: 'pro' } })
        expectExecuted(first)
        expect(first.body.key).toBe(key)
        expectReplayOf(await post('/api/subscriptions', { key, body: { plan: 'pro' } }), first)
      })

      it('treats the RFC 8941 string "k1" as the bare key k1', async () => {
        const key = randomUUID()
        const quoted = await post('/api/subscriptions', { key: `"${key}"`, body: { plan: 'pro' } })
        expectExecuted(quoted)
        expect(quoted.body.key).toBe(key)
        expectReplayOf(await post('/api/subscriptions', { key, body: { plan: 'pro' } }), quoted)
        expect(await executions('subscriptions', key)).toBe(1)
      })

      it('answers a duplicate of a request in flight with 409 request-in-progress and Retry-After: 1', async () => {
        const key = randomUUID()
        const { answer: pending } = await startSlow(key, { plan: 'pro' })
        const duplicate = await post('/api/slow', { key, body: { plan: 'pro' } })
        expectProblem(duplicate, 409, 'request-in-progress')
        expect(duplicate.headers.get('retry-after')).toBe('1')
        const first = await pending
        expectExecuted(first)
        expect(first.body).toMatchObject({ plan: 'pro', execution: 1 })
        expectReplayOf(await post('/api/slow', { key, body: { plan: 'pro' } }), first)
        expect(await executions('slow', key)).toBe(1)
      })

      it('lets a duplicate with Prefer: wait=5 wait for the request in flight and get its replay', async () => {
        const key = randomUUID()
        const { answer: pending } = await startSlow(key, { plan: 'pro' })
        const waited = await post('/api/slow', { key, body: { plan: 'pro' }, headers: { prefer: 'wait=5' } })
        const first = await pending
        expectExecuted(first)
        expectReplayOf(waited, first)
        expect(await executions('slow', key)).toBe(1)
      })

      it('never stores a 5xx: the retry executes again, and its success is replayed', async () => {
        const key = randomUUID()
        const failed = await post('/api/flaky', { key, body: { plan: 'pro' } })
        expect(failed.status).toBe(500)
        expect(failed.headers.get('idempotent-replayed')).toBeNull()
        const retried = await post('/api/flaky', { key, body: { plan: 'pro' } })
        expectExecuted(retried)
        expect(retried.body).toEqual({ attempt: 2 })
        expect(retried.headers.get('location')).toBe('/api/flaky/2')
        expectReplayOf(await post('/api/flaky', { key, body: { plan: 'pro' } }), retried)
        expect(await executions('flaky', key)).toBe(2)
      })

      it('stores a thrown 4xx and replays it', async () => {
        const key = randomUUID()
        const refused = await post('/api/rejections', { key, body: { plan: 'legacy' } })
        expect(refused.status).toBe(403)
        expect(refused.headers.get('idempotent-replayed')).toBeNull()
        // The error's data is what the client gets.
        expect(refused.body).toMatchObject({ plan: 'legacy', execution: 1 })
        const again = await post('/api/rejections', { key, body: { plan: 'legacy' } })
        expect({ status: again.status, body: again.body }).toEqual({ status: 403, body: refused.body })
        expect(again.headers.get('idempotent-replayed')).toBe('true')
        expect(await executions('rejections', key)).toBe(1)
      })

      it('keeps keys per scope: two tenants use the same key independently', async () => {
        const key = randomUUID()
        const acme = await post('/api/tenant-subscriptions', { key, body: { plan: 'pro' }, headers: { 'x-tenant': 'acme' } })
        expectExecuted(acme)
        expect(acme.body).toMatchObject({ tenant: 'acme', plan: 'pro', execution: 1 })
        const globex = await post('/api/tenant-subscriptions', { key, body: { plan: 'pro' }, headers: { 'x-tenant': 'globex' } })
        expectExecuted(globex)
        expect(globex.body).toMatchObject({ tenant: 'globex', plan: 'pro', execution: 1 })
        expect(globex.body.scope).not.toBe(acme.body.scope)
        expectReplayOf(await post('/api/tenant-subscriptions', { key, body: { plan: 'pro' }, headers: { 'x-tenant': 'acme' } }), acme)
        expectReplayOf(await post('/api/tenant-subscriptions', { key, body: { plan: 'pro' }, headers: { 'x-tenant': 'globex' } }), globex)
        // Another body under one tenant's key is still refused within that tenant.
        expectProblem(await post('/api/tenant-subscriptions', { key, body: { plan: 'team' }, headers: { 'x-tenant': 'acme' } }), 422, 'idempotency-key-reused')
        expect(await executions('tenant-subscriptions', `acme ${key}`)).toBe(1)
        expect(await executions('tenant-subscriptions', `globex ${key}`)).toBe(1)
      })

      it('runs a route whose routeRules say required: false without a key, every time', async () => {
        const ref = randomUUID()
        const first = await post('/api/optional', { body: { ref } })
        expectExecuted(first)
        expect(first.body).toEqual({ ref, keyed: false, execution: 1 })
        const second = await post('/api/optional', { body: { ref } })
        expectExecuted(second)
        expect(second.body).toEqual({ ref, keyed: false, execution: 2 })
        expect(await executions('optional', `ref:${ref}`)).toBe(2)
      })

      it('still makes a keyed request idempotent on a route where the key is optional', async () => {
        const key = randomUUID()
        const first = await post('/api/optional', { key, body: { ref: 'keyed' } })
        expectExecuted(first)
        expect(first.body).toEqual({ ref: 'keyed', keyed: true, execution: 1 })
        expectReplayOf(await post('/api/optional', { key, body: { ref: 'keyed' } }), first)
        expect(await executions('optional', key)).toBe(1)
      })

      it('executes 10 concurrent copies of one request once', async () => {
        const key = randomUUID()
        const answers = await Promise.all(Array.from({ length: 10 }, () => post('/api/slow', { key, body: { plan: 'pro' } })))
        const executed = expectOneExecution(answers)
        expect(await executions('slow', key)).toBe(1)
        expectReplayOf(await post('/api/slow', { key, body: { plan: 'pro' } }), executed)
      })
    })

    describe('webhooks (Standard Webhooks)', () => {
      const payload = (type: string) => JSON.stringify({ type, timestamp: new Date().toISOString(), data: { subscription: randomUUID() } })

      it('executes a signed delivery once and replays its redelivery', async () => {
        const webhookId = `msg_${randomUUID().replaceAll('-', '')}`
        const body = payload('subscription.renewed')
        const first = await post('/api/webhooks/standard', signedDelivery(secret, webhookId, body))
        expect(first.status).toBe(200)
        expect(first.headers.get('idempotent-replayed')).toBeNull()
        expect(first.body).toEqual({ received: 'subscription.renewed', execution: 1 })
        // The provider redelivers the same event later, signed again.
        const redelivered = await post('/api/webhooks/standard', signedDelivery(secret, webhookId, body, new Date(Date.now() + 2_000)))
        expectReplayOf(redelivered, first)
        expect(await executions('webhooks', webhookId)).toBe(1)
      })

      it('refuses a delivery with a bad signature with a 401 problem and runs nothing', async () => {
        const webhookId = `msg_${randomUUID().replaceAll('-', '')}`
        const body = payload('subscription.cancelled')
        const forged = await post('/api/webhooks/standard', signedDelivery(webhookSecret(), webhookId, body))
        expect(forged.status).toBe(401)
        expect(forged.headers.get('content-type')).toMatch(/^application\/problem\+json\b/)
        expect(forged.body).toMatchObject({ status: 401, type: expect.stringMatching(/^\/problems\//) })
        expect(await executions('webhooks', webhookId)).toBe(0)
        // Nothing was stored for the event: the genuine delivery still executes.
        const genuine = await post('/api/webhooks/standard', signedDelivery(secret, webhookId, body))
        expect(genuine.status).toBe(200)
        expect(genuine.headers.get('idempotent-replayed')).toBeNull()
        expect(await executions('webhooks', webhookId)).toBe(1)
      })
    })

    describe('webhooks (Midtrans)', () => {
      const refunds = (...amounts: number[]) => ({
        refund_amount: `${amounts.reduce((total, amount) => total + amount, 0)}.00`,
        refunds: amounts.map((amount, index) => ({ refund_chargeback_id: index + 1, refund_amount: `${amount}.00`, refund_key: `ref-${index + 1}` })),
      })

      it('executes a settlement and each later refund of the order once (one signed triple, distinct notifications), and replays a redelivery whose unsigned details changed', async () => {
        const orderId = `ord_${randomUUID()}`
        const settled = await post('/api/webhooks/midtrans', midtransNotification(midtransServerKey, orderId, 'settlement'))
        expect(settled.status).toBe(200)
        expect(settled.headers.get('idempotent-replayed')).toBeNull()
        expect(settled.body).toEqual({ received: 'settlement', execution: 1 })
        const firstRefund = await post('/api/webhooks/midtrans', midtransNotification(midtransServerKey, orderId, 'partial_refund', refunds(30_000)))
        expect(firstRefund.status).toBe(200)
        expect(firstRefund.headers.get('idempotent-replayed')).toBeNull()
        expect(firstRefund.body).toEqual({ received: 'partial_refund', execution: 1 })
        const secondRefund = await post('/api/webhooks/midtrans', midtransNotification(midtransServerKey, orderId, 'partial_refund', refunds(30_000, 40_000)))
        expect(secondRefund.status).toBe(200)
        expect(secondRefund.headers.get('idempotent-replayed')).toBeNull()
        expect(await executions('midtrans', `${orderId}:200:150000.00:settlement`)).toBe(1)
        expect(await executions('midtrans', `${orderId}:200:150000.00:partial_refund:30000`)).toBe(1)
        expect(await executions('midtrans', `${orderId}:200:150000.00:partial_refund:70000`)).toBe(1)

        // Midtrans redelivers: a new transaction_id and transaction_time, the same notification.
        const redelivered = await post('/api/webhooks/midtrans', midtransNotification(midtransServerKey, orderId, 'partial_refund', { ...refunds(30_000, 40_000), transaction_time: '2026-12-05 10:05:00' }))
        expectReplayOf(redelivered, secondRefund)
        expectReplayOf(await post('/api/webhooks/midtrans', midtransNotification(midtransServerKey, orderId, 'settlement')), settled)
        expect(await executions('midtrans', `${orderId}:200:150000.00:partial_refund:70000`)).toBe(1)
      })

      it('refuses a notification signed with another key, an undocumented status, or a refund_amount above gross_amount (401), and runs nothing', async () => {
        const orderId = `ord_${randomUUID()}`
        const before = await executions('midtrans')
        for (const delivery of [
          midtransNotification('SB-Mid-server-another', orderId, 'settlement'),
          midtransNotification(midtransServerKey, orderId, 'paid'),
          midtransNotification(midtransServerKey, orderId, 'partial_refund', { refund_amount: '150001.00' }),
          midtransNotification(midtransServerKey, orderId, 'partial_refund', { refund_amount: '100.50' }),
        ]) {
          expectProblem(await post('/api/webhooks/midtrans', delivery), 401, 'webhook-signature-invalid')
        }
        expect(await executions('midtrans')).toBe(before)
      })
    })
  })
}
