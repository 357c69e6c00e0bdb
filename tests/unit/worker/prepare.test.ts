import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import type { Database } from '@idempotent-checkout/db-kit'
import { orderResource } from '../../../shared/resources'
import { PermanentJobError, RetryableJobError, SnoozeJob } from '../../../server/jobs/errors'
import { defineJobKind, type JobKind } from '../../../server/jobs/kind'
import type { ClaimedJob } from '../../../server/jobs/store'
import { type PreparedJob, prepareBatch } from '../../../server/jobs/worker/prepare'
import { claimedJob, deferred, idleKind } from './fakes'

const db = {} as Database
const order = z.object({ orderId: z.string() })
const mail = z.object({ to: z.string() })

/**
 * Two order kinds sharing one loader and locking their order, a mail kind with its own loader and
 * no resource, and `idleKind` (neither). Each loader call is recorded as `[loader, db, payloads]`;
 * an order's entry is `<index in the call>:<order id>`, so a misplaced answer shows.
 */
function kinds(options: { ordersFail?: Error } = {}) {
  const loads: Array<[string, Database, unknown[]]> = []
  const loadOrders = async (given: Database, payloads: Array<z.infer<typeof order>>) => {
    loads.push(['orders', given, payloads])
    if (options.ordersFail) throw options.ordersFail
    return payloads.map((payload, index) => `${index}:${payload.orderId}`)
  }
  const loadMails = async (given: Database, payloads: Array<z.infer<typeof mail>>) => {
    loads.push(['mails', given, payloads])
    return payloads.map(payload => `mail to ${payload.to}`)
  }
  const byName = new Map<string, JobKind>([
    defineJobKind({ kind: 'order.capture', payload: order, resource: payload => orderResource(payload.orderId), load: loadOrders, run: async () => {} }),
    defineJobKind({ kind: 'order.refund', payload: order, resource: payload => orderResource(payload.orderId), load: loadOrders, run: async () => {} }),
    defineJobKind({ kind: 'mail.send', payload: mail, load: loadMails, run: async () => {} }),
    idleKind,
  ].map(kind => [kind.kind, kind]))
  return { kinds: byName, loads }
}

/** prepareBatch over those kinds, the batches handed to the lock keeper recorded; `locking` answers for it when given. */
function prepare(claimed: ClaimedJob[], options: { faultsEnabled?: boolean, ordersFail?: Error, locking?: Promise<void> } = {}) {
  const { kinds: byName, loads } = kinds(options)
  const locked: PreparedJob[][] = []
  const prepared = prepareBatch(claimed, {
    db,
    kinds: byName,
    faultsEnabled: options.faultsEnabled ?? false,
    lockAll: async (entries) => {
      locked.push(entries)
      await options.locking
    },
  })
  return { prepared, loads, locked, kinds: byName }
}

const capture = (id: string, orderId: unknown, overrides: Partial<ClaimedJob> = {}) => claimedJob({ id, kind: 'order.capture', payload: { orderId }, ...overrides })
const refund = (id: string, orderId: string) => claimedJob({ id, kind: 'order.refund', payload: { orderId } })
const sendMail = (id: string, to: string) => claimedJob({ id, kind: 'mail.send', payload: { to } })

describe('prepareBatch', () => {
  it('parses each payload, derives the lock key from its kind\'s resource, and hands the whole batch to the lock keeper once', async () => {
    const claimed = [capture('job_1', 'o1'), claimedJob({ id: 'job_2' })]
    const { prepared, locked, kinds: byName } = prepare(claimed)
    const batch = await prepared
    expect(batch).toStrictEqual([
      { job: claimed[0], kind: byName.get('order.capture'), payload: { orderId: 'o1' }, lockKey: 'lock:order:o1', loaded: '0:o1' },
      { job: claimed[1], kind: idleKind, payload: {}, lockKey: undefined },
    ])
    expect(locked).toHaveLength(1)
    expect(locked[0]).toBe(batch)
  })

  it('fails a payload that does not parse permanently: no lock key, no load', async () => {
    const claimed = [capture('job_1', 7)]
    const { prepared, loads, locked, kinds: byName } = prepare(claimed)
    const [entry] = await prepared
    expect(entry).toStrictEqual({
      job: claimed[0],
      kind: byName.get('order.capture'),
      failure: new PermanentJobError('invalid payload: ✖ Invalid input: expected string, received number\n  → at orderId'),
    })
    expect(entry!.failure).toBeInstanceOf(PermanentJobError)
    expect(loads).toEqual([])
    expect(locked).toEqual([[entry]])
  })

  it('fails a job with an injected fault before it takes a lock or is loaded, when faults are enabled', async () => {
    const claimed = [
      capture('job_1', 'o1', { faults: { failPermanently: true } }),
      capture('job_2', 'o2', { faults: { snoozeMs: 500 } }),
      capture('job_3', 'o3', { attempt: 2, faults: { failTimes: 2 } }),
      capture('job_4', 'o4'),
    ]
    const { prepared, loads } = prepare(claimed, { faultsEnabled: true })
    const batch = await prepared
    expect(batch.map(({ lockKey, failure }) => ({ lockKey, failure }))).toStrictEqual([
      { lockKey: undefined, failure: new PermanentJobError('permanent failure injected') },
      { lockKey: undefined, failure: new SnoozeJob(500, 'snooze fault injected') },
      { lockKey: undefined, failure: new RetryableJobError('failure injected (attempt 2 of the first 2)') },
      { lockKey: 'lock:order:o4', failure: undefined },
    ])
    expect(batch[1]!.failure).toBeInstanceOf(SnoozeJob)
    expect(loads.map(([loader, , payloads]) => [loader, payloads])).toEqual([['orders', [{ orderId: 'o4' }]]])
  })

  it('ignores the faults of a job when faults are disabled', async () => {
    const { prepared } = prepare([capture('job_1', 'o1', { faults: { failPermanently: true } })])
    const [entry] = await prepared
    expect(entry!.failure).toBeUndefined()
    expect(entry!.lockKey).toBe('lock:order:o1')
  })

  it('calls each distinct loader once for the batch and gives each job its own answer, in order', async () => {
    const claimed = [capture('job_1', 'o1'), sendMail('job_2', 'a@example.com'), refund('job_3', 'o2'), claimedJob({ id: 'job_4' }), capture('job_5', 7), capture('job_6', 'o3')]
    const { prepared, loads } = prepare(claimed)
    const batch = await prepared
    expect(loads).toEqual([
      ['orders', db, [{ orderId: 'o1' }, { orderId: 'o2' }, { orderId: 'o3' }]],
      ['mails', db, [{ to: 'a@example.com' }]],
    ])
    expect(loads[0]![1]).toBe(db)
    expect(batch.map(entry => entry.loaded)).toEqual(['0:o1', 'mail to a@example.com', '1:o2', undefined, undefined, '2:o3'])
  })

  it('fails every job of a loader that throws, retryably, and only those', async () => {
    const error = new Error('connection reset')
    const claimed = [capture('job_1', 'o1'), sendMail('job_2', 'a@example.com'), refund('job_3', 'o2')]
    const { prepared } = prepare(claimed, { ordersFail: error })
    const batch = await prepared
    const failure = new RetryableJobError('reading the job\'s data failed: Error: connection reset', { cause: error })
    expect(batch.map(({ loaded, failure }) => ({ loaded, failure }))).toStrictEqual([
      { loaded: undefined, failure },
      { loaded: 'mail to a@example.com', failure: undefined },
      { loaded: undefined, failure },
    ])
    expect(batch[0]!.failure).toBeInstanceOf(RetryableJobError)
    expect((batch[2]!.failure as Error).cause).toBe(error)
  })

  it('answers once the batch\'s locks are taken, its reads under way meanwhile', async () => {
    const locking = deferred<undefined>()
    const { prepared, loads, locked } = prepare([capture('job_1', 'o1'), refund('job_2', 'o1'), capture('job_3', 'o2')], { locking: locking.promise })
    let answered = false
    void prepared.then(() => { answered = true })
    await new Promise(resolve => setImmediate(resolve))
    expect(locked.map(batch => batch.map(entry => entry.lockKey))).toEqual([['lock:order:o1', 'lock:order:o1', 'lock:order:o2']])
    expect(loads).toHaveLength(1)
    expect(answered).toBe(false)
    locking.resolve(undefined)
    expect((await prepared).map(entry => entry.job.id)).toEqual(['job_1', 'job_2', 'job_3'])
  })
})
