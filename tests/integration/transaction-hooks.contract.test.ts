import { eq, sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Database, DatabaseHandle, AfterCommitHook } from '@idempotent-checkout/db-kit'
import { jobs, tenants } from '../../server/db/schema'
import { defineStatement, afterCommit, queryPrepared, transaction, violatedConstraint, writeAtCommit } from '@idempotent-checkout/db-kit'
import { jobInsert } from '../../server/jobs/enqueue'
import { orderSendConfirmationJob } from '../../server/orders/job-types'
import { onLocalWake } from '../../server/jobs/wake'
import { openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { enqueueTestJob } from '../support/jobs'
import { describeWithServices } from '../support/services'

/**
 * A transaction owns its after-commit hooks (transaction() of @idempotent-checkout/db-kit): whoever writes inside it
 * registers what must wait for the commit — an enqueue registers the workers' wake-up — and the
 * hooks run once it committed, never after a rollback. Same contract on both drivers.
 */
// Postgres twice: transactions pipelined (as the app opens it) and as postgres.js' own begin runs them.
for (const [driver, pipelining] of [['postgres', true], ['postgres', false], ['pglite', false]] as const) {
  describeWithServices(`after-commit hooks (${driver}${driver === 'postgres' ? `, pipelining ${pipelining ? 'on' : 'off'}` : ''})`, driver === 'postgres' ? ['postgres'] : [], () => {
    let database: SuiteDatabase
    let handle: DatabaseHandle
    let db: Database
    let counter = 0

    beforeAll(async () => {
      database = await openSuiteDatabase(driver, `hooks-${driver}-${pipelining}`, { pipelining })
      handle = database.handle
      db = handle.db
    }, 60_000)
    afterAll(async () => { await database?.close() })

    const tenantId = () => `ten_hooks_${driver}_${pipelining}_${++counter}`
    const tenantExists = async (id: string) => (await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, id))).length === 1

    it('runs the hooks once the transaction committed, in order, each distinct hook once, with the handle', async () => {
      const id = tenantId()
      const seen: string[] = []
      const first: AfterCommitHook = (hookHandle) => { seen.push(`first:${hookHandle === handle}`) }
      const second: AfterCommitHook = () => { seen.push('second') }
      const result = await transaction(db, async (tx) => {
        await tx.insert(tenants).values({ id, name: 'hooks' })
        afterCommit(tx, first)
        afterCommit(tx, second)
        afterCommit(tx, first)
        // Not yet: the transaction is still open.
        expect(seen).toEqual([])
        return 'answer'
      })
      expect(result).toBe('answer')
      expect(seen).toEqual(['first:true', 'second'])
      expect(await tenantExists(id)).toBe(true)
    })

    it('runs no hook of a transaction that rolled back', async () => {
      const id = tenantId()
      const seen: string[] = []
      const failure = new Error('business check failed after the write')
      await expect(transaction(db, async (tx) => {
        await tx.insert(tenants).values({ id, name: 'hooks' })
        afterCommit(tx, () => { seen.push('ran') })
        throw failure
      })).rejects.toBe(failure)
      expect(seen).toEqual([])
      expect(await tenantExists(id)).toBe(false)
    })

    it('a failing hook does not stop the others or fail the committed transaction', async () => {
      const seen: string[] = []
      await transaction(db, async (tx) => {
        afterCommit(tx, () => { throw new Error('hook failed') })
        afterCommit(tx, () => { seen.push('second') })
      })
      expect(seen).toEqual(['second'])
    })

    it('on the database itself (autocommit) the hook runs at once; in a transaction not opened by transaction() it is refused', async () => {
      const seen: string[] = []
      afterCommit(db, () => { seen.push('now') })
      expect(seen).toEqual(['now'])
      await expect(db.transaction(async (tx) => { afterCommit(tx as unknown as Database, () => {}) })).rejects.toThrow(/open the transaction with transaction\(\)/)
    })

    it('an enqueue wakes this process\'s workers after the commit, once per transaction, and not at all after a rollback', async () => {
      let wakes = 0
      const stop = onLocalWake(() => { wakes++ })
      try {
        await transaction(db, async (tx) => {
          await enqueueTestJob(tx, { kind: 'hooks.noop', dedupeKey: `a-${++counter}`, payload: {} })
          await enqueueTestJob(tx, { kind: 'hooks.noop', dedupeKey: `b-${counter}`, payload: {} })
          expect(wakes).toBe(0)
        })
        expect(wakes).toBe(1)
        await expect(transaction(db, async (tx) => {
          await enqueueTestJob(tx, { kind: 'hooks.noop', dedupeKey: `c-${counter}`, payload: {} })
          throw new Error('rolled back')
        })).rejects.toThrow('rolled back')
        expect(wakes).toBe(1)
        expect(await db.select({ id: jobs.id }).from(jobs).where(eq(jobs.dedupeKey, `c-${counter}`))).toEqual([])
      }
      finally {
        stop()
      }
    })

    it('a job insert sent with transact() wakes the workers once it committed, and a failed transact wakes no one', async () => {
      let wakes = 0
      const stop = onLocalWake(() => { wakes++ })
      const failingInsert = defineStatement(d => d.insert(tenants).values({ id: 'ten_fixed_hooks', name: 'hooks' }))
      try {
        const orderId = `ord_hooks_${driver}_${++counter}`
        const insert = jobInsert(db, orderSendConfirmationJob, { orderId }, { dedupeKey: orderId })
        await handle.transact([insert])
        expect(wakes).toBe(1)
        expect(await db.select({ resourceId: jobs.resourceId, payload: jobs.payload }).from(jobs).where(eq(jobs.dedupeKey, orderId)))
          .toEqual([{ resourceId: `order:${orderId}`, payload: { orderId } }])

        await handle.transact([failingInsert(db, {})])
        const again = `ord_hooks_${driver}_${++counter}`
        // The tenant exists now: this transaction fails on its primary key, job insert included.
        await expect(handle.transact([jobInsert(db, orderSendConfirmationJob, { orderId: again }, { dedupeKey: again }), failingInsert(db, {})])).rejects.toThrow()
        expect(wakes).toBe(1)
        expect(await db.select({ id: jobs.id }).from(jobs).where(eq(jobs.dedupeKey, again))).toEqual([])
      }
      finally {
        stop()
      }
    })

    it('writeAtCommit: the deferred writes run after the work\'s own statements, in the order deferred, and commit with them', async () => {
      const id = tenantId()
      const result = await transaction(db, async (tx) => {
        writeAtCommit(tx, tx.update(tenants).set({ name: 'second' }).where(eq(tenants.id, id)))
        writeAtCommit(tx, tx.execute(sql`update tenants set name = name || ' then third' where id = ${id}`))
        await tx.insert(tenants).values({ id, name: 'first' })
        // Not sent yet: the work's own statements see none of them.
        expect(await tx.select({ name: tenants.name }).from(tenants).where(eq(tenants.id, id))).toEqual([{ name: 'first' }])
        return 'answer'
      })
      expect(result).toBe('answer')
      expect(await db.select({ name: tenants.name }).from(tenants).where(eq(tenants.id, id))).toEqual([{ name: 'second then third' }])
    })

    it('writeAtCommit: a defineStatement\'s BoundStatement is deferred like a query, its values (JSON, nulls, a text with `$` in it) bound as given', async () => {
      const id = `job_hooks_${driver}_${pipelining}_${++counter}`
      const payload = { orderId: 'ord_$1', note: 'it costs $2', nested: [1, null] }
      await transaction(db, async (tx) => {
        writeAtCommit(tx, jobInsert(tx, orderSendConfirmationJob, payload as never, { dedupeKey: id, requestId: '$3' }))
        writeAtCommit(tx, tx.update(jobs).set({ lastError: 'after the insert' }).where(eq(jobs.dedupeKey, id)))
        // Not sent yet.
        expect(await tx.select({ id: jobs.id }).from(jobs).where(eq(jobs.dedupeKey, id))).toEqual([])
      })
      const [row] = await db.select({ payload: jobs.payload, requestId: jobs.requestId, idempotencyKey: jobs.idempotencyKey, lastError: jobs.lastError }).from(jobs).where(eq(jobs.dedupeKey, id))
      expect(row).toEqual({ payload, requestId: '$3', idempotencyKey: null, lastError: 'after the insert' })
    })

    it('queryPrepared on a transaction is one of its statements: it sees the transaction\'s writes and rolls back with it', async () => {
      const id = tenantId()
      const nameOf = defineStatement<{ id: string }>(d => d.select({ name: tenants.name }).from(tenants).where(eq(tenants.id, sql.placeholder('id'))))
      const rename = defineStatement<{ id: string, name: string }>(d => d.update(tenants).set({ name: sql`${sql.placeholder('name')}` }).where(eq(tenants.id, sql.placeholder('id'))).returning({ name: tenants.name }))
      const failure = new Error('rolled back on purpose')
      await expect(transaction(db, async (tx) => {
        await tx.insert(tenants).values({ id, name: 'uncommitted' })
        expect(await queryPrepared(tx, nameOf(tx, { id }))).toEqual([{ name: 'uncommitted' }])
        expect(await queryPrepared(tx, rename(tx, { id, name: 'renamed' }))).toEqual([{ name: 'renamed' }])
        throw failure
      })).rejects.toBe(failure)
      expect(await tenantExists(id)).toBe(false)
      await transaction(db, async (tx) => {
        await tx.insert(tenants).values({ id, name: 'kept' })
        await queryPrepared(tx, rename(tx, { id, name: 'kept, renamed' }))
      })
      expect(await queryPrepared(db, nameOf(db, { id }))).toEqual([{ name: 'kept, renamed' }])
    })

    it('writeAtCommit: a deferred write that fails rolls the whole transaction back, runs no hook, and is what transaction() rejects with', async () => {
      const id = tenantId()
      const seen: string[] = []
      const failed = transaction(db, async (tx) => {
        await tx.insert(tenants).values({ id, name: 'kept only if all commits' })
        afterCommit(tx, () => { seen.push('ran') })
        // The same primary key again: fails at the COMMIT's write.
        writeAtCommit(tx, tx.insert(tenants).values({ id, name: 'duplicate' }))
      })
      await expect(failed).rejects.toSatisfy(error => violatedConstraint(error) === 'tenants_pkey')
      expect(seen).toEqual([])
      expect(await tenantExists(id)).toBe(false)
    })

    it('writeAtCommit is refused outside transaction()', () => {
      expect(() => writeAtCommit(db, db.insert(tenants).values({ id: tenantId(), name: 'never' }))).toThrow(/outside transaction\(\)/)
    })

    it('a statement whose failure the work caught aborts the transaction: transaction() rejects and nothing is kept', async () => {
      const id = tenantId()
      await expect(transaction(db, async (tx) => {
        await tx.insert(tenants).values({ id, name: 'first' })
        await tx.insert(tenants).values({ id, name: 'duplicate' }).catch(() => 'caught')
      })).rejects.toThrow()
      expect(await tenantExists(id)).toBe(false)
    })
  })
}
