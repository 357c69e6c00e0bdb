import { describe, expect, it } from 'vitest'
import {
  emailEntry, eventEntry, type EventIdOf, type EventRow, historyEntry, type HistoryRow, invoiceEntry, jobEntries, type JobRow, operatorActionEntry, type OperatorActionRow,
  orderEntry, type OrderRow, recordEntries, type RecordRow, refundEntry, type RefundRow, requestEntry, type RequestRow, sideEffectEntry, stockMovementEntry,
  type StockMovementRow, type WebhookAttemptRow, webhookDeliveryEntry, webhookEventEntry, type WebhookEventRow,
} from '../../server/ops/evidence-entries'

// Each row → entry mapper on fixed rows: the exact entries, links (ids) and detail the evidence
// timeline shows, with what orders them (identity, rank).

const t0 = new Date('2026-03-01T10:00:00.000Z')
const t1 = new Date('2026-03-01T10:00:01.500Z')
const t2 = new Date('2026-03-01T10:00:03.000Z')
const noEvents: EventIdOf = () => undefined
const knownEvent: EventIdOf = id => (id === 'whe_1' ? 'msg_1' : undefined)

const requestRow: RequestRow = {
  id: 42, requestId: 'req_1', clientRequestId: 'client-7', authenticatedBy: 'tenant_key', method: 'POST', path: '/api/orders',
  tenantId: 'ten_1', scope: 'tenant:ten_1', idempotencyKey: 'key-1', outcome: 'miss', status: 201, durationMs: 12, instance: 'host:1', createdAt: t0,
}

describe('requestEntry', () => {
  it('a verified request: its answer, outcome, time and instance', () => {
    expect(requestEntry(requestRow)).toStrictEqual({
      identity: 'request:0000000000000042',
      rank: 8,
      entry: {
        at: '2026-03-01T10:00:00.000Z',
        kind: 'request',
        summary: 'POST /api/orders answered 201 (miss) after 12 ms on host:1.',
        ids: { requestId: 'req_1', key: 'key-1', scope: 'tenant:ten_1' },
        verified: true,
        detail: {
          requestId: 'req_1', clientRequestId: 'client-7', authenticatedBy: 'tenant_key', method: 'POST', path: '/api/orders', tenantId: 'ten_1',
          scope: 'tenant:ten_1', key: 'key-1', outcome: 'miss', status: 201, durationMs: 12, instance: 'host:1', loggedAt: '2026-03-01T10:00:00.000Z',
        },
      },
    })
  })

  it('an unverified request the client left before its answer: 499, no outcome, no links but its id', () => {
    const row: RequestRow = { ...requestRow, authenticatedBy: null, status: 499, outcome: null, scope: null, idempotencyKey: null, tenantId: null }
    const { entry } = requestEntry(row)
    expect(entry.summary).toBe('POST /api/orders the client disconnected before the answer (499) after 12 ms on host:1; unverified: no key, session, ops token or signature proved who sent it.')
    expect(entry.verified).toBe(false)
    expect(entry.ids).toStrictEqual({ requestId: 'req_1' })
  })
})

const recordRow: RecordRow = {
  id: 'rec-1', scope: 'tenant:ten_1', key: 'key-1', route: 'POST /api/orders', fingerprint: 'fp', status: 'succeeded', leaseToken: 'secret-lease',
  leaseExpiresAt: null, attempts: 1, requestId: 'req_1', responseStatus: 201, responseBody: { id: 'ord_1' }, responseHeaders: { location: '/api/orders/ord_1' },
  resourceType: 'order', resourceId: 'ord_1', error: null, createdAt: t0, updatedAt: t1, expiresAt: t2,
}
const recordDetail = {
  id: 'rec-1', scope: 'tenant:ten_1', key: 'key-1', route: 'POST /api/orders', fingerprint: 'fp', status: 'succeeded', leaseExpiresAt: null, attempts: 1,
  requestId: 'req_1', responseStatus: 201, responseHeaders: { location: '/api/orders/ord_1' }, resourceType: 'order', resourceId: 'ord_1', error: null,
  responseBody: { id: 'ord_1' }, createdAt: '2026-03-01T10:00:00.000Z', updatedAt: '2026-03-01T10:00:01.500Z', expiresAt: '2026-03-01T10:00:03.000Z',
}

describe('recordEntries', () => {
  it('a stored record: claimed, then stored with its resource; the lease token is never shown', () => {
    const ids = { key: 'key-1', scope: 'tenant:ten_1', requestId: 'req_1', orderId: 'ord_1' }
    expect(recordEntries(recordRow)).toStrictEqual([
      {
        identity: 'record:rec-1:claimed',
        rank: 0,
        entry: { at: '2026-03-01T10:00:00.000Z', kind: 'idempotency_record', summary: 'Key "key-1" claimed in tenant:ten_1 for POST /api/orders by request req_1.', ids, detail: { ...recordDetail, transition: 'claimed' } },
      },
      {
        identity: 'record:rec-1:stored',
        rank: 4,
        entry: {
          at: '2026-03-01T10:00:01.500Z',
          kind: 'idempotency_record',
          summary: 'Key "key-1" stored succeeded with 201 → order ord_1 after 1 attempt(s); replays answer this.',
          ids,
          detail: { ...recordDetail, transition: 'succeeded' },
        },
      },
    ])
  })

  it('a provider\'s record names its event id and webhook event', () => {
    const [claimed] = recordEntries({ ...recordRow, scope: 'provider:standard', key: 'msg_1', resourceType: 'webhook_event', resourceId: 'whe_1' })
    expect(claimed!.entry.ids).toStrictEqual({ key: 'msg_1', scope: 'provider:standard', requestId: 'req_1', webhookEventId: 'whe_1', eventId: 'msg_1' })
  })

  it('a processing record changed since its claim: claimed, then still processing with its last failure', () => {
    const row: RecordRow = { ...recordRow, status: 'processing', attempts: 2, error: 'boom', responseStatus: null, responseBody: null, resourceType: null, resourceId: null, leaseExpiresAt: t2 }
    const entries = recordEntries(row)
    expect(entries.map(({ identity, rank }) => ({ identity, rank }))).toStrictEqual([{ identity: 'record:rec-1:claimed', rank: 0 }, { identity: 'record:rec-1:updated', rank: 4 }])
    expect(entries[1]!.entry.summary).toBe('Key "key-1" is still processing after 2 attempt(s); last failure: boom.')
    expect(entries[1]!.entry.detail).toMatchObject({ transition: 'processing', leaseExpiresAt: '2026-03-01T10:00:03.000Z' })
    expect(entries[1]!.entry.ids).toStrictEqual({ key: 'key-1', scope: 'tenant:ten_1', requestId: 'req_1' })
  })

  it('a processing record untouched since its claim is the claim alone', () => {
    const entries = recordEntries({ ...recordRow, status: 'processing', updatedAt: t0 })
    expect(entries.map(entry => entry.identity)).toStrictEqual(['record:rec-1:claimed'])
  })
})

const jobRow: JobRow = {
  id: 'job_1', kind: 'webhook.apply', dedupeKey: 'whe_1', payload: { webhookEventId: 'whe_1' }, status: 'completed', attempt: 2, maxAttempts: 5,
  snoozes: 0, runAt: t0, lastError: 'timeout', resourceId: 'order:ord_1', idempotencyKey: 'msg_1', requestId: 'req_2', lockedBy: 'worker-a',
  fence: 7, faults: null, startedAt: t1, heartbeatAt: t1, completedAt: t2, dismissedReason: null, dismissedAt: null, createdAt: t0, updatedAt: t2,
  errors: [{ attempt: 1, at: '2026-03-01T10:00:01.000Z', startedAt: '2026-03-01T10:00:00.500Z', retryAt: '2026-03-01T10:00:01.200Z', errorClass: 'retryable', message: 'timeout', worker: 'worker-b' }],
}

describe('jobEntries', () => {
  it('a completed job after a failed attempt: the job with its lock key, the failure, the completion', () => {
    const { errors, ...fields } = jobRow
    const ids = { jobId: 'job_1', orderId: 'ord_1', key: 'msg_1', requestId: 'req_2', webhookEventId: 'whe_1', eventId: 'msg_1' }
    expect(jobEntries(jobRow, knownEvent)).toStrictEqual([
      {
        identity: 'job:job_1',
        rank: 3,
        entry: {
          at: '2026-03-01T10:00:00.000Z',
          kind: 'job',
          summary: 'Job webhook.apply enqueued for order:ord_1; now completed after 2 of 5 attempt(s).',
          ids,
          detail: { ...fields, lockKey: 'lock:order:ord_1', failedAttempts: 1 },
        },
      },
      {
        identity: 'job:job_1:error:0',
        rank: 5,
        entry: {
          at: '2026-03-01T10:00:01.000Z',
          kind: 'job_attempt',
          summary: 'Attempt 1 of webhook.apply failed on worker-b (retryable: timeout); retry at 2026-03-01T10:00:01.200Z.',
          ids,
          detail: { ...errors[0], outcome: 'failed' },
        },
      },
      {
        identity: 'job:job_1:completed',
        rank: 5,
        entry: {
          at: '2026-03-01T10:00:03.000Z',
          kind: 'job_attempt',
          summary: 'Attempt 2 of webhook.apply completed on worker-a (fence 7).',
          ids,
          detail: { attempt: 2, outcome: 'completed', startedAt: '2026-03-01T10:00:01.500Z', at: '2026-03-01T10:00:03.000Z', worker: 'worker-a', fence: 7 },
        },
      },
    ])
  })

  it('a running job after a rescue: the rescue dead-ends nowhere, the running attempt is shown', () => {
    const row: JobRow = {
      ...jobRow, kind: 'order.effects', status: 'running', completedAt: null, payload: {}, resourceId: 'tenant-wide', lockedBy: null, fence: null,
      errors: [{ ...jobRow.errors[0]!, errorClass: 'rescued', message: 'heartbeat lapsed', retryAt: null, worker: null }],
    }
    const entries = jobEntries(row, noEvents)
    expect(entries.map(({ identity, entry }) => [identity, entry.summary])).toStrictEqual([
      ['job:job_1', 'Job order.effects enqueued for tenant-wide; now running after 2 of 5 attempt(s).'],
      ['job:job_1:error:0', 'Attempt 1 of order.effects was rescued on an unknown worker (rescued: heartbeat lapsed); dead-lettered.'],
      ['job:job_1:running:2', 'Attempt 2 of order.effects is running on an unknown worker (fence –).'],
    ])
    // Not an order's resource: no order link; its lock key follows the resource.
    expect(entries[0]!.entry.ids).toStrictEqual({ jobId: 'job_1', key: 'msg_1', requestId: 'req_2' })
    expect(entries[0]!.entry.detail.lockKey).toBe('lock:tenant-wide')
    expect(entries[1]!.entry.detail.outcome).toBe('rescued')
    expect(entries[2]!.entry.detail).toStrictEqual({ attempt: 2, outcome: 'running', startedAt: '2026-03-01T10:00:01.500Z', heartbeatAt: '2026-03-01T10:00:01.500Z', worker: null, fence: null })
  })

  it('a queued job without a resource has no lock key and no attempts', () => {
    const entries = jobEntries({ ...jobRow, status: 'queued', resourceId: null, completedAt: null, startedAt: null, errors: [] }, noEvents)
    expect(entries).toHaveLength(1)
    expect(entries[0]!.entry.summary).toBe('Job webhook.apply enqueued for no resource; now queued after 2 of 5 attempt(s).')
    expect(entries[0]!.entry.detail).toMatchObject({ lockKey: null, failedAttempts: 0 })
    // The event was not seen: its provider id is unknown here.
    expect(entries[0]!.entry.ids).toStrictEqual({ jobId: 'job_1', key: 'msg_1', requestId: 'req_2', webhookEventId: 'whe_1' })
  })
})

const historyRow: HistoryRow = {
  id: 3, orderId: 'ord_1', fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', reason: null,
  webhookEventId: 'whe_1', refundId: null, jobId: 'job_1', requestId: null, createdAt: t1,
}

describe('historyEntry', () => {
  it('an applied change by a webhook event, named by the provider\'s event id when seen', () => {
    expect(historyEntry(historyRow, knownEvent)).toStrictEqual({
      identity: 'history:0000000000000003',
      rank: 2,
      entry: {
        at: '2026-03-01T10:00:01.500Z',
        kind: 'order_status',
        summary: 'Order ord_1 moved pending_payment → paid by webhook event whe_1.',
        ids: { orderId: 'ord_1', jobId: 'job_1', webhookEventId: 'whe_1', eventId: 'msg_1' },
        detail: { ...historyRow, createdAt: '2026-03-01T10:00:01.500Z' },
      },
    })
  })

  it('an ignored change says what was asked and why', () => {
    const { entry } = historyEntry({ ...historyRow, outcome: 'ignored', fromStatus: 'paid', requestedStatus: 'failed', reason: 'paid is final', webhookEventId: null }, knownEvent)
    expect(entry.summary).toBe('Order ord_1 stayed paid (ignored failed: paid is final).')
    expect(entry.ids).toStrictEqual({ orderId: 'ord_1', jobId: 'job_1' })
  })

  it('an applied row that left the status as it was is not a move: it says the order stayed, and why', () => {
    const requested = historyEntry({ ...historyRow, fromStatus: 'paid', requestedStatus: null, toStatus: 'paid', reason: 'refund_requested', refundId: 're_1', webhookEventId: null, requestId: 'req_1' }, knownEvent)
    expect(requested.entry.summary).toBe('Order ord_1 stayed paid (applied without a status change: refund_requested, refund re_1).')
    expect(requested.entry.summary).not.toMatch(/moved|→/)

    const settled = historyEntry({ ...historyRow, fromStatus: 'partially_refunded', requestedStatus: 'refunded', toStatus: 'partially_refunded', reason: 'refund_succeeded', refundId: 're_2' }, knownEvent)
    expect(settled.entry.summary).toBe('Order ord_1 stayed partially_refunded (applied refunded without a status change: refund_succeeded, refund re_2) by webhook event whe_1.')

    const bare = historyEntry({ ...historyRow, fromStatus: 'paid', requestedStatus: 'paid', toStatus: 'paid', reason: null, webhookEventId: null }, knownEvent)
    expect(bare.entry.summary).toBe('Order ord_1 stayed paid (applied paid without a status change).')
  })
})

const orderRow: OrderRow = {
  id: 'ord_1', tenantId: 'ten_1', cartId: 'cart-1', status: 'payment_failed', currency: 'IDR', amount: 150_000, paymentMethod: 'card',
  items: [{ sku: 'sku-1', quantity: 1, unitPrice: 150_000 }], customer: { email: 'a@example.com' }, idempotencyKey: 'key-1', requestId: 'req_1',
  paymentIntentId: 'pi_1', paymentProvider: 'stripe', paymentNextAction: { type: 'stripe_client_secret', clientSecret: 'pi_1_secret_x' } as OrderRow['paymentNextAction'],
  paymentError: { code: 'card_declined', message: 'The card was declined.', providerMessage: 'Your card was declined.' } as OrderRow['paymentError'], cancelReason: null,
  paymentCheckedAt: null, checkoutSessionId: null, createdAt: t0, updatedAt: t2,
}

describe('orderEntry', () => {
  it('the order with its payment and refusal; the next action keeps its type only', () => {
    expect(orderEntry(orderRow)).toStrictEqual({
      identity: 'order:ord_1',
      rank: 1,
      entry: {
        at: '2026-03-01T10:00:00.000Z',
        kind: 'order',
        summary: 'Order ord_1 created for cart cart-1 (IDR 150,000, a@example.com) by request req_1; now payment_failed; payment pi_1 at stripe; stripe refused the payment (card_declined: Your card was declined.).',
        ids: { orderId: 'ord_1', key: 'key-1', scope: 'tenant:ten_1', requestId: 'req_1' },
        detail: { ...orderRow, paymentNextAction: { type: 'stripe_client_secret' }, createdAt: '2026-03-01T10:00:00.000Z', updatedAt: '2026-03-01T10:00:03.000Z' },
      },
    })
  })

  it('an order without payment yet', () => {
    const { entry } = orderEntry({ ...orderRow, status: 'pending_payment', paymentIntentId: null, paymentProvider: null, paymentNextAction: null, paymentError: null, idempotencyKey: null })
    expect(entry.summary).toBe('Order ord_1 created for cart cart-1 (IDR 150,000, a@example.com) by request req_1; now pending_payment.')
    expect(entry.ids).toStrictEqual({ orderId: 'ord_1', scope: 'tenant:ten_1', requestId: 'req_1' })
    expect(entry.detail.paymentNextAction).toBeNull()
  })
})

const refundRow: RefundRow = {
  id: 're_1', orderId: 'ord_1', tenantId: 'ten_1', amount: 50_000, currency: 'IDR', status: 'failed', reason: 'duplicate', source: 'api',
  providerRefundId: null, failure: 'amount_too_large: more than remains', idempotencyKey: 'refund-key-1', requestId: 'req_4', createdAt: t1, updatedAt: t2, settledAt: t2,
}

describe('refundEntry', () => {
  it('a refund of ours names the key the provider is asked under, and why it failed', () => {
    expect(refundEntry(refundRow)).toStrictEqual({
      identity: 'refund:re_1',
      rank: 1,
      entry: {
        at: '2026-03-01T10:00:01.500Z',
        kind: 'refund',
        summary: 'Refund re_1 of order ord_1 (IDR 50,000, duplicate) asked for through the API; asked of the provider under the key refund:re_1; failed (amount_too_large: more than remains).',
        ids: { orderId: 'ord_1', key: 'refund-key-1', requestId: 'req_4' },
        detail: { ...refundRow, createdAt: '2026-03-01T10:00:01.500Z', updatedAt: '2026-03-01T10:00:03.000Z', settledAt: '2026-03-01T10:00:03.000Z', providerKey: 'refund:re_1' },
      },
    })
  })

  it('a refund made at the provider was asked under no key of ours', () => {
    const { entry } = refundEntry({ ...refundRow, source: 'provider', status: 'succeeded', failure: null, reason: null, providerRefundId: 're_stripe', idempotencyKey: null, requestId: null })
    expect(entry.summary).toBe('Refund re_1 of order ord_1 (IDR 50,000) made at the provider (its dashboard), learned from its event; the provider\'s refund re_stripe; succeeded.')
    expect(entry.detail.providerKey).toBeUndefined()
  })
})

const webhookRow: WebhookEventRow = {
  id: 'whe_1', provider: 'midtrans', eventId: 'msg_1', type: 'payment.succeeded', orderId: 'ord_1', paymentId: 'pi_1', amount: 150_000, currency: 'IDR', refund: null, listedRefunds: null,
  rawBody: '{"ok":"é"}', signatureHeaders: { 'x-signature': 'sig' }, status: 'applied', source: 'webhook',
  confirmation: { found: true, providerStatus: 'settlement', type: 'payment.succeeded' }, requestId: 'req_3', receivedAt: t1, processedAt: t2,
}

describe('webhookEventEntry', () => {
  it('a delivered event with what the status API confirmed; the raw body by its size in bytes', () => {
    const { rawBody: _rawBody, ...fields } = webhookRow
    expect(webhookEventEntry(webhookRow)).toStrictEqual({
      identity: 'webhook_event:whe_1',
      rank: 1,
      entry: {
        at: '2026-03-01T10:00:01.500Z',
        kind: 'webhook_event',
        summary: 'midtrans event msg_1 (payment.succeeded, IDR 150,000) stored for order ord_1 by request req_3; applied; midtrans\'s status API said settlement (payment.succeeded).',
        ids: { eventId: 'msg_1', webhookEventId: 'whe_1', orderId: 'ord_1', requestId: 'req_3', key: 'msg_1', scope: 'provider:midtrans' },
        detail: { ...fields, rawBodyBytes: 11, receivedAt: '2026-03-01T10:00:01.500Z', processedAt: '2026-03-01T10:00:03.000Z' },
      },
    })
  })

  it('an event the status API does not know, and one found by reconciliation', () => {
    expect(webhookEventEntry({ ...webhookRow, confirmation: { found: false }, amount: null }).entry.summary)
      .toBe('midtrans event msg_1 (payment.succeeded, no amount) stored for order ord_1 by request req_3; applied; midtrans\'s status API does not know this payment.')
    const reconciled = webhookEventEntry({ ...webhookRow, provider: 'stripe', source: 'reconciliation', confirmation: null, status: 'received', processedAt: null })
    expect(reconciled.entry.summary).toBe('No webhook came: reconciliation asked stripe\'s API for payment pi_1 and found payment.succeeded (IDR 150,000); stored for order ord_1 as event msg_1, applied through webhook.apply like a webhook; received.')
    expect(reconciled.entry.ids.scope).toBe('provider:stripe')
    expect(reconciled.entry.detail.processedAt).toBeNull()
  })
})

const actionRow: OperatorActionRow = { id: 9, action: 'api_key.revoke', tenantId: 'ten_1', subjectId: 'key_1', requestId: 'req_4', detail: { keyPrefix: 'sk_live_ab' }, createdAt: t0 }

describe('operatorActionEntry', () => {
  it('an action on an API key links the key and names its prefix', () => {
    expect(operatorActionEntry(actionRow)).toStrictEqual({
      identity: 'operator_action:0000000000000009',
      rank: 1,
      entry: {
        at: '2026-03-01T10:00:00.000Z',
        kind: 'operator_action',
        summary: 'Operator action api_key.revoke on key_1 (sk_live_ab) of tenant ten_1 by request req_4.',
        ids: { requestId: 'req_4', tenantId: 'ten_1', keyId: 'key_1' },
        detail: { ...actionRow, createdAt: '2026-03-01T10:00:00.000Z' },
      },
    })
  })

  it('an action from the command line on something else links no key', () => {
    const { entry } = operatorActionEntry({ ...actionRow, action: 'job.dismiss', subjectId: 'job_1', requestId: null, detail: {} })
    expect(entry.summary).toBe('Operator action job.dismiss on job_1 of tenant ten_1 by no request (the command line).')
    expect(entry.ids).toStrictEqual({ tenantId: 'ten_1' })
  })
})

describe('side effect, email and invoice entries', () => {
  it('each names its order and what was done', () => {
    expect(sideEffectEntry({ id: 5, orderId: 'ord_1', effect: 'email.confirmation', jobId: null, createdAt: t2 })).toStrictEqual({
      identity: 'side_effect:0000000000000005',
      rank: 6,
      entry: {
        at: '2026-03-01T10:00:03.000Z',
        kind: 'side_effect',
        summary: 'Side effect email.confirmation of order ord_1 marked done by job unknown.',
        ids: { orderId: 'ord_1' },
        detail: { id: 5, orderId: 'ord_1', effect: 'email.confirmation', jobId: null, createdAt: '2026-03-01T10:00:03.000Z' },
      },
    })
    expect(emailEntry({ id: 'mail_1', tenantId: 'ten_1', orderId: 'ord_1', to: 'a@example.com', subject: 'Paid', body: 'Thanks', messageId: null, createdAt: t2 })).toStrictEqual({
      identity: 'email:mail_1',
      rank: 7,
      entry: {
        at: '2026-03-01T10:00:03.000Z',
        kind: 'email',
        summary: 'Email "Paid" sent to a@example.com.',
        ids: { orderId: 'ord_1' },
        detail: { id: 'mail_1', tenantId: 'ten_1', orderId: 'ord_1', to: 'a@example.com', subject: 'Paid', body: 'Thanks', messageId: null, createdAt: '2026-03-01T10:00:03.000Z' },
      },
    })
    expect(emailEntry({ id: 'mail_2', tenantId: 'ten_1', orderId: 'ord_1', to: 'a@example.com', subject: 'Paid', body: 'Thanks', messageId: '<confirmation_email.ord_1@shop.example>', createdAt: t2 }).entry.summary)
      .toBe('Email "Paid" sent to a@example.com over SMTP as <confirmation_email.ord_1@shop.example>.')
    expect(invoiceEntry({ id: 'inv_1', tenantId: 'ten_1', orderId: 'ord_1', amount: 1_234_567, currency: 'USD', createdAt: t2 })).toStrictEqual({
      identity: 'invoice:inv_1',
      rank: 7,
      entry: {
        at: '2026-03-01T10:00:03.000Z',
        kind: 'invoice',
        summary: 'Invoice inv_1 issued for order ord_1 (USD 1,234,567).',
        ids: { orderId: 'ord_1' },
        detail: { id: 'inv_1', tenantId: 'ten_1', orderId: 'ord_1', amount: 1_234_567, currency: 'USD', createdAt: '2026-03-01T10:00:03.000Z' },
      },
    })
  })
})

describe('stockMovementEntry', () => {
  const reserve: StockMovementRow = {
    id: 7, tenantId: 'ten_1', sku: 'TOTE-CANVAS', kind: 'reserve', sourceType: 'order', sourceId: 'ord_1', orderId: 'ord_1', quantity: 2,
    onHandDelta: 0, reservedDelta: 2, reason: null, requestId: 'req_1', jobId: null, createdAt: t0,
  }

  it('a reservation: the order, the units held, linked to the order, request and tenant, beside the order\'s status rows', () => {
    expect(stockMovementEntry(reserve)).toStrictEqual({
      identity: 'stock_movement:0000000000000007',
      rank: 2,
      entry: {
        at: '2026-03-01T10:00:00.000Z',
        kind: 'stock_movement',
        summary: 'Order ord_1 reserved 2 × TOTE-CANVAS: held for it until it is paid, canceled or expires (reserved +2).',
        ids: { orderId: 'ord_1', requestId: 'req_1', tenantId: 'ten_1' },
        detail: {
          id: 7, tenantId: 'ten_1', sku: 'TOTE-CANVAS', kind: 'reserve', sourceType: 'order', sourceId: 'ord_1', orderId: 'ord_1', quantity: 2,
          onHandDelta: 0, reservedDelta: 2, reason: null, requestId: 'req_1', jobId: null, createdAt: '2026-03-01T10:00:00.000Z',
        },
      },
    })
  })

  it('the payment\'s commit, each release with its cause, and a refund\'s restock say what moved and why', () => {
    const summaryOf = (row: Partial<StockMovementRow>) => stockMovementEntry({ ...reserve, requestId: null, ...row }).entry.summary
    expect(summaryOf({ id: 8, kind: 'commit', onHandDelta: -2, reservedDelta: -2, jobId: 'job_1' }))
      .toBe('The payment of order ord_1 took its 2 × TOTE-CANVAS off the shelf (on hand −2, reserved −2).')
    expect(summaryOf({ id: 9, kind: 'release', reservedDelta: -2, reason: 'canceled' })).toBe('Order ord_1\'s 2 × TOTE-CANVAS went back on sale: the order was canceled (reserved −2).')
    expect(summaryOf({ id: 9, kind: 'release', reservedDelta: -2, reason: 'expired' })).toBe('Order ord_1\'s 2 × TOTE-CANVAS went back on sale: the order expired unpaid (reserved −2).')
    expect(summaryOf({ id: 9, kind: 'release', reservedDelta: -2, reason: 'refused' })).toBe('Order ord_1\'s 2 × TOTE-CANVAS went back on sale: the provider refused the payment (reserved −2).')
    expect(summaryOf({ id: 10, kind: 'restock', sourceType: 'refund', sourceId: 're_1', quantity: 1, onHandDelta: 1, reservedDelta: 0 }))
      .toBe('Refund re_1 of order ord_1 put 1 × TOTE-CANVAS back on the shelf (on hand +1).')
    expect(stockMovementEntry({ ...reserve, id: 8, kind: 'commit', requestId: null, jobId: 'job_1' }).entry.ids).toStrictEqual({ orderId: 'ord_1', jobId: 'job_1', tenantId: 'ten_1' })
  })
})

describe('our events and their deliveries', () => {
  const event: EventRow = {
    id: 'evt_1', tenantId: 'ten_1', sequence: 4096, type: 'order.paid', objectId: 'ord_1', orderId: 'ord_1', data: { id: 'ord_1', status: 'paid' }, createdAt: t0,
  }
  const attempt: WebhookAttemptRow = {
    id: 7, eventId: 'evt_1', endpointId: 'we_1', tenantId: 'ten_1', orderId: 'ord_1', jobId: 'job_9', attempt: 2, statusCode: 503,
    delivered: false, error: null, latencyMs: 120, responseExcerpt: 'busy', createdAt: t1,
  }

  it('an event: its type, id and sequence, linked to its order and tenant, after its transaction\'s other rows at the same instant', () => {
    expect(eventEntry(event)).toStrictEqual({
      identity: 'event:evt_1',
      rank: 4,
      entry: {
        at: '2026-03-01T10:00:00.000Z',
        kind: 'event',
        summary: 'Event order.paid evt_1 (sequence 4096) written for ord_1 in the change\'s own transaction; every delivery of it carries webhook-id evt_1.',
        ids: { eventId: 'evt_1', orderId: 'ord_1', tenantId: 'ten_1' },
        detail: { ...event, createdAt: '2026-03-01T10:00:00.000Z' },
      },
    })
  })

  it('a delivery attempt: endpoint, attempt, status and latency; one without an answer says why', () => {
    expect(webhookDeliveryEntry(attempt, 'https://shop.example/hooks')).toStrictEqual({
      identity: 'webhook_delivery:0000000000000007',
      rank: 5,
      entry: {
        at: '2026-03-01T10:00:01.500Z',
        kind: 'webhook_delivery',
        summary: 'Attempt 2 to deliver event evt_1 to endpoint we_1 (https://shop.example/hooks): not delivered, answered 503 after 120 ms.',
        ids: { eventId: 'evt_1', endpointId: 'we_1', orderId: 'ord_1', jobId: 'job_9', tenantId: 'ten_1' },
        detail: { ...attempt, url: 'https://shop.example/hooks', createdAt: '2026-03-01T10:00:01.500Z' },
      },
    })
    expect(webhookDeliveryEntry({ ...attempt, statusCode: null, error: 'timeout after 10000 ms', latencyMs: 10_000 }, undefined).entry.summary)
      .toBe('Attempt 2 to deliver event evt_1 to endpoint we_1: not delivered, no answer (timeout after 10000 ms) after 10000 ms.')
  })

  it('a delivery job names the event it sends and the endpoint; a resend is an operator action on the event', () => {
    const job: JobRow = { ...jobRow, idempotencyKey: null, requestId: null, kind: 'webhook.deliver', payload: { eventId: 'evt_1', endpointId: 'we_1' }, resourceId: 'webhook_endpoint:we_1' }
    expect(jobEntries(job, noEvents)[0]!.entry.ids).toStrictEqual({ jobId: job.id, eventId: 'evt_1', endpointId: 'we_1' })
    const resent: OperatorActionRow = { id: 3, action: 'event.resent', tenantId: 'ten_1', subjectId: 'evt_1', requestId: 'req_ops', detail: { endpointIds: ['we_1'] }, createdAt: t2 }
    expect(operatorActionEntry(resent).entry.ids).toStrictEqual({ requestId: 'req_ops', tenantId: 'ten_1', eventId: 'evt_1' })
  })
})
