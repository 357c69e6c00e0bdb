import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { appEnv } from '../support/app'
import { effectsPerOrder, enqueueJobs, jobRow, type JobsFixture, jobStatusCounts, openJobsFixture, orderJob, seedOrders } from '../support/jobs'
import { pollUntil } from '../support/poll'
import { projectRoot, spawnManaged, stopAll } from '../support/processes'
import { startRedisServer, type TestRedisServer } from '../support/redis-server'
import { createTestDatabase, describeWithServices, redisUrl, uniqueRedisPrefix } from '../support/services'
import { logLines, type StartWorkerOptions, startWorker, type WorkerProcess } from '../support/worker'

// `npm run worker` as real processes against a real Postgres and Redis: several workers drain one
// queue, and workers crash, freeze, lose their Redis locks and shut down mid-job. Every claim carries
// a fence token and every side effect a marker row, so whatever happens to the processes, each
// order gets exactly one email, one invoice and one payment intent — asserted on rows.

/** Jobs enqueued here send no NOTIFY and rescued jobs wake nobody: poll often so the tests do not wait on it. */
const quickPolling = { JOB_POLL_INTERVAL_MS: '100' }

describeWithServices('standalone worker processes', ['postgres', 'redis'], () => {
  describe('against a fresh database', () => {
    let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
    let fixture: JobsFixture | undefined
    let redisKeyPrefix: string
    let frozen: WorkerProcess[] = []

    beforeEach(async () => {
      database = await createTestDatabase('worker_processes')
      fixture = await openJobsFixture(database.url)
      redisKeyPrefix = uniqueRedisPrefix('worker_processes')
      frozen = []
    })

    afterEach(async () => {
      // A stopped (SIGSTOP) process would hold its SIGTERM pending until the force kill.
      for (const worker of frozen) worker.kill('SIGCONT')
      await stopAll()
      await fixture?.close()
      await database?.drop()
      fixture = undefined
      database = undefined
    })

    /** A worker on this test's database and Redis prefix, so all workers of a test contend for the same locks. */
    const worker = (label: string, env: Record<string, string> = {}, options: Partial<StartWorkerOptions> = {}) =>
      startWorker({ databaseUrl: database!.url, redisUrl, redisKeyPrefix, label, env: { ...quickPolling, ...env }, ...options })

    async function waitUntilStalling(holder: WorkerProcess, jobId: string): Promise<void> {
      await pollUntil(`${holder.workerId} holds ${jobId}`, async () => {
        const row = await jobRow(fixture!.sql, jobId)
        return row?.status === 'running' && row.lockedBy === holder.workerId
      }, { timeoutMs: 20_000 })
      // The stall starts after the resource lock is taken, just before the commit: truly mid-job.
      await pollUntil(`${holder.workerId} stalls in ${jobId}`, async () => logLines(holder, 'job stalling (test fault): heartbeat and lock renewal paused')
        .some(line => line.jobId === jobId), { timeoutMs: 10_000 })
    }

    async function emailsFor(orderId: string): Promise<number> {
      const [row] = await fixture!.sql<Array<{ count: number }>>`select count(*)::int as count from mailbox where order_id = ${orderId}`
      return row!.count
    }

    it('two workers drain 1,000 queued jobs: each completed once at attempt 1, one email and one invoice per order, both workers busy', async () => {
      const { db, sql } = fixture!
      const { orderIds } = await seedOrders(db, 500)
      // Both kinds of one order next to each other in the queue, so the workers contend for `lock:order:<id>`.
      await enqueueJobs(db, orderIds.flatMap(orderId => [
        orderJob(orderId),
        orderJob(orderId, { kind: 'order.issue_invoice' }),
      ]))
      expect(await jobStatusCounts(sql)).toEqual({ queued: 1000 })

      const workers = await Promise.all(['drain-A', 'drain-B'].map(label => worker(label, { WORKER_CONCURRENCY: '4' })))
      await pollUntil('1,000 jobs completed', async () => (await jobStatusCounts(sql)).completed === 1000, { timeoutMs: 90_000, intervalMs: 250 })

      expect(await jobStatusCounts(sql)).toEqual({ completed: 1000 })
      // A busy resource puts the job back with its attempt given back: contention never spends one.
      expect(await sql`select attempt, count(*)::int as count from jobs group by attempt`).toEqual([{ attempt: 1, count: 1000 }])
      expect(await sql`select count(*)::int as count from jobs where errors <> '[]'::jsonb or last_error is not null`).toEqual([{ count: 0 }])

      const effects = await effectsPerOrder(sql, orderIds)
      expect(effects.size).toBe(500)
      for (const [orderId, counts] of effects) {
        expect(counts, orderId).toEqual({ emails: 1, invoices: 1, markers: 2, intents: 0 })
      }
      expect(await sql`select effect, count(*)::int as count from side_effects group by effect order by effect`).toEqual([
        { effect: 'confirmation_email', count: 500 },
        { effect: 'invoice', count: 500 },
      ])

      const perWorker = await sql<Array<{ lockedBy: string, count: number }>>`
        select locked_by as "lockedBy", count(*)::int as count from jobs group by locked_by order by locked_by`
      expect(perWorker.map(row => row.lockedBy).sort()).toEqual(workers.map(w => w.workerId).sort())
      for (const row of perWorker) expect(row.count, row.lockedBy).toBeGreaterThan(0)

      const [drain] = await sql<Array<{ seconds: number }>>`
        select extract(epoch from max(completed_at) - min(started_at))::float8 as seconds from jobs`
      const lockBusy = workers.flatMap(w => logLines(w, 'job attempt finished')).filter(line => line.transition === 'lock_busy').length
      console.log(`Two workers × concurrency 4 drained 1,000 jobs in ${drain!.seconds.toFixed(2)} s (${(1000 / drain!.seconds).toFixed(0)} jobs/s, database clock); `
        + `per worker ${perWorker.map(row => `${row.lockedBy}=${row.count}`).join(', ')}; lock_busy put-backs ${lockBusy}`)
    }, 150_000)

    it('SIGKILL mid-job: another worker rescues the job after the heartbeat timeout and completes it once at attempt 2', async () => {
      const { db, sql } = fixture!
      const { orderIds: [orderId] } = await seedOrders(db, 1)
      const [jobId] = await enqueueJobs(db, [orderJob(orderId!, { faults: { stallMs: 60_000 } })])

      // A short lock TTL so the dead worker's `lock:order:<id>` expires within the test.
      const workerA = await worker('killed-A', { JOB_HEARTBEAT_TIMEOUT_MS: '1000', JOB_LOCK_TTL_MS: '1000' })
      await waitUntilStalling(workerA, jobId!)
      workerA.kill('SIGKILL')
      expect(await workerA.exited).toBeNull()
      expect(await jobRow(sql, jobId!)).toMatchObject({ status: 'running', attempt: 1, lockedBy: workerA.workerId })

      const workerB = await worker('rescuer-B', { JOB_HEARTBEAT_TIMEOUT_MS: '1000', JOB_MAINTENANCE_INTERVAL_MS: '200' })
      await pollUntil(`${jobId} completed`, async () => (await jobRow(sql, jobId!))?.status === 'completed', { timeoutMs: 20_000 })

      const row = await jobRow(sql, jobId!)
      expect(row).toMatchObject({ status: 'completed', attempt: 2, lockedBy: workerB.workerId, lastError: null })
      expect(row!.errors).toEqual([{
        attempt: 1,
        at: expect.any(String),
        startedAt: expect.any(String),
        retryAt: expect.any(String),
        errorClass: 'rescued',
        message: `rescued: no heartbeat from ${workerA.workerId} for 1000 ms`,
        worker: workerA.workerId,
      }])
      expect(await emailsFor(orderId!)).toBe(1)
      expect(logLines(workerB, 'job rescued: its worker stopped heart-beating').map(line => line.jobId)).toEqual([jobId])
    })

    it('lock expiry mid-job: the frozen worker wakes after the job was re-run elsewhere and its commit is fenced out', async () => {
      const { db, sql } = fixture!
      const { orderIds: [orderId] } = await seedOrders(db, 1)
      // A real pause freezes the whole process; the stall fault freezes one job, so A gets a single
      // slot and no prefetch, and cannot claim the rescued job itself while its first attempt sleeps.
      const stalling = { WORKER_CONCURRENCY: '1', WORKER_PREFETCH: '0', JOB_LOCK_TTL_MS: '300', JOB_HEARTBEAT_TIMEOUT_MS: '1000' }
      const rescuing = { JOB_MAINTENANCE_INTERVAL_MS: '200', JOB_HEARTBEAT_TIMEOUT_MS: '1000' }
      // B is started first and frozen, so it is ready the moment A holds the job: starting a
      // process takes seconds, and the 4 s stall leaves no room for that on a loaded machine.
      const [workerA, workerB] = await Promise.all([worker('frozen-A', stalling), worker('successor-B', rescuing)])
      workerB.kill('SIGSTOP')
      frozen.push(workerB)

      const [jobId] = await enqueueJobs(db, [orderJob(orderId!, { faults: { stallMs: 4000 } })])
      await waitUntilStalling(workerA, jobId!)
      const claimedByA = await jobRow(sql, jobId!)
      workerB.kill('SIGCONT')

      // A's lock expired (no renewal while stalled) and its heartbeat is stale: B rescues and re-runs.
      await pollUntil(`${jobId} completed`, async () => (await jobRow(sql, jobId!))?.status === 'completed', { timeoutMs: 20_000 })
      const row = await jobRow(sql, jobId!)
      expect(row).toMatchObject({ status: 'completed', attempt: 2, lockedBy: workerB.workerId })
      expect(row!.fence).toBeGreaterThan(claimedByA!.fence!)
      expect(row!.errors.map(entry => [entry.errorClass, entry.worker])).toEqual([['rescued', workerA.workerId]])

      await pollUntil('A woke and finished its attempt', async () => logLines(workerA, 'job attempt finished').some(line => line.jobId === jobId), { timeoutMs: 15_000 })
      expect(logLines(workerA, 'job attempt finished').filter(line => line.jobId === jobId)).toEqual([
        expect.objectContaining({ jobId, attempt: 1, fence: claimedByA!.fence, worker: workerA.workerId, transition: 'fenced_out' }),
      ])
      expect(logLines(workerB, 'job attempt finished').filter(line => line.jobId === jobId)).toEqual([
        expect.objectContaining({ jobId, attempt: 2, fence: row!.fence, worker: workerB.workerId, transition: 'completed', lockResult: 'acquired' }),
      ])
      // A's late commit changed nothing.
      expect(await jobRow(sql, jobId!)).toEqual(row)
      expect(await emailsFor(orderId!)).toBe(1)
    })

    // Reproduces the intermittent 'lock_lost' above deterministically: the new owner's transaction
    // holds the job row while the woken worker commits, so the worker's lock renewal (every 100 ms)
    // fails before its fenced commit is rejected, and the runner reports the renewal, not the fence.
    it('a commit rejected by the fence is reported fenced_out even when lock renewal fails while it waits', async () => {
      const { db, sql } = fixture!
      const { orderIds: [orderId] } = await seedOrders(db, 1)
      const [jobId] = await enqueueJobs(db, [orderJob(orderId!, { faults: { stallMs: 2000 } })])
      const workerA = await worker('frozen-A', { WORKER_CONCURRENCY: '1', JOB_LOCK_TTL_MS: '300', JOB_HEARTBEAT_TIMEOUT_MS: '60000' })
      await waitUntilStalling(workerA, jobId!)

      // Another worker's claim of the job, its transaction still open when A wakes and commits.
      await sql.begin(async (tx) => {
        await tx`update jobs set fence = nextval('job_fence_seq'), attempt = attempt + 1, locked_by = 'successor', heartbeat_at = now()
          where id = ${jobId!}`
        await pollUntil('A\'s commit waits for the job row', async () => {
          const [waiting] = await sql<Array<{ count: number }>>`
            select count(*)::int as count from pg_locks l join pg_stat_activity a on a.pid = l.pid
            where not l.granted and a.datname = current_database()`
          return waiting!.count > 0
        }, { timeoutMs: 15_000 })
        // Several renewal periods: A's lock expired during the stall, so a renewal fails meanwhile.
        await sleep(500)
      })

      await pollUntil('A finished its attempt', async () => logLines(workerA, 'job attempt finished').some(line => line.jobId === jobId), { timeoutMs: 10_000 })
      expect(await jobRow(sql, jobId!)).toMatchObject({ status: 'running', attempt: 2, lockedBy: 'successor', completedAt: null })
      expect(await emailsFor(orderId!)).toBe(0)
      // Nothing was put back (the fence refused that too) and the attempt was not A's to give back.
      expect(logLines(workerA, 'job attempt finished').filter(line => line.jobId === jobId)).toEqual([
        expect.objectContaining({ jobId, attempt: 1, worker: workerA.workerId, transition: 'fenced_out' }),
      ])
    })

    it('SIGTERM to `npm run worker` reaches the worker: it stops gracefully ("worker stopped"), and no process of it is left running', async () => {
      const env = appEnv({ databaseUrl: database!.url, redisUrl, label: 'npm-worker', env: { ...quickPolling, REDIS_KEY_PREFIX: redisKeyPrefix } })
      const npm = spawn('npm', ['run', 'worker'], { cwd: projectRoot, env: { ...env, LOG_LEVEL: 'info', WORKER_ID: 'npm-worker' }, stdio: ['ignore', 'pipe', 'pipe'] })
      let output = ''
      npm.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
      npm.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
      const closed = once(npm, 'close')
      try {
        await pollUntil('npm run worker started the worker', async () => output.includes('"msg":"worker started"'), { timeoutMs: 60_000 })
        const started = descendantsOf(npm.pid!)
        expect(started.length, output).toBeGreaterThan(0)
        npm.kill('SIGTERM')
        await Promise.race([closed, sleep(15_000).then(() => { throw new Error(`npm run worker did not exit within 15 s of SIGTERM:\n${output}`) })])
        await pollUntil(`npm's processes (${started.join(', ')}) are gone`, async () => started.every(pid => !isRunning(pid)), { timeoutMs: 10_000 })
        expect(output).toContain('"msg":"worker stopped"')
      }
      finally {
        for (const pid of descendantsOf(npm.pid!)) process.kill(pid, 'SIGKILL')
        npm.kill('SIGKILL')
      }
    }, 120_000)

    it('SIGTERM mid-job: the job is released with its attempt given back, then completes once at attempt 1', async () => {
      const { db, sql } = fixture!
      const { orderIds: [orderId] } = await seedOrders(db, 1)
      const [jobId] = await enqueueJobs(db, [orderJob(orderId!, { faults: { stallMs: 30_000 } })])

      const workerA = await worker('terminated-A', { JOB_SHUTDOWN_GRACE_MS: '300' })
      await waitUntilStalling(workerA, jobId!)
      workerA.kill('SIGTERM')
      expect(await workerA.exited).toBe(0)

      expect(await jobRow(sql, jobId!)).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, errors: [], completedAt: null })
      expect(await emailsFor(orderId!)).toBe(0)
      expect(logLines(workerA, 'job attempt finished')).toEqual([expect.objectContaining({ jobId, transition: 'released', reason: 'shutdown' })])
      expect(logLines(workerA, 'worker stopped')).toEqual([expect.objectContaining({ worker: workerA.workerId, released: 1 })])

      // The stall fault keys on attempt 1, which the release gave back: run the retry without faults.
      const workerB = await worker('successor-B', { FAULTS_ENABLED: 'false' })
      await pollUntil(`${jobId} completed`, async () => (await jobRow(sql, jobId!))?.status === 'completed', { timeoutMs: 20_000 })
      expect(await jobRow(sql, jobId!)).toMatchObject({ status: 'completed', attempt: 1, lockedBy: workerB.workerId, errors: [] })
      expect(await emailsFor(orderId!)).toBe(1)
    })

    describe('with a private Redis', () => {
      let privateRedis: TestRedisServer | undefined
      let flusher: Redis | undefined

      afterEach(async () => {
        flusher?.disconnect()
        await stopAll()
        await privateRedis?.stop()
      })

      it('FLUSHALL during the drain: locks vanish, jobs step back and re-run, every effect exactly once', async () => {
        const { db, sql } = fixture!
        privateRedis = await startRedisServer()
        flusher = new Redis(privateRedis.url, { maxRetriesPerRequest: 1 })
        const { orderIds } = await seedOrders(db, 150)
        await enqueueJobs(db, orderIds.flatMap(orderId => [
          orderJob(orderId, { kind: 'payment.create_intent' }),
          orderJob(orderId),
        ]))
        const total = orderIds.length * 2

        // A 60 ms lock renewed every 20 ms: a flush between two renewals makes the next one fail.
        // The heartbeat timeout is far away, so nothing is rescued: only lost locks interrupt jobs.
        const env = { WORKER_CONCURRENCY: '4', JOB_LOCK_TTL_MS: '60', JOB_HEARTBEAT_TIMEOUT_MS: '10000', JOB_LOCK_BUSY_DELAY_MS: '20' }
        let draining = true
        const flushes = (async () => {
          let count = 0
          while (draining) {
            await flusher!.flushall()
            count++
            await sleep(50)
          }
          return count
        })()
        let workers: WorkerProcess[] = []
        try {
          workers = await Promise.all(['flushed-A', 'flushed-B'].map(label => worker(label, env, { redisUrl: privateRedis!.url })))
          await pollUntil(`${total} jobs completed`, async () => (await jobStatusCounts(sql)).completed === total, { timeoutMs: 60_000, intervalMs: 100 })
        }
        finally {
          draining = false
        }
        const flushCount = await flushes

        expect(await jobStatusCounts(sql)).toEqual({ completed: total })
        // A lost lock gives the attempt back, like a busy one.
        expect(await sql`select attempt, count(*)::int as count from jobs group by attempt`).toEqual([{ attempt: 1, count: total }])
        expect(await sql`select count(*)::int as count from jobs where errors <> '[]'::jsonb`).toEqual([{ count: 0 }])

        const effects = await effectsPerOrder(sql, orderIds)
        expect(effects.size).toBe(orderIds.length)
        for (const [orderId, counts] of effects) {
          expect(counts, orderId).toEqual({ emails: 1, invoices: 0, markers: 1, intents: 1 })
        }
        const intentMismatches = await sql`
          select o.id, o.payment_intent_id, p.id as intent_id
          from orders o left join payment_intents p on p.order_id = o.id
          where o.payment_intent_id is distinct from p.id`
        expect(intentMismatches).toEqual([])

        const finished = workers.flatMap(w => logLines(w, 'job attempt finished'))
        const transitions = Object.fromEntries(['completed', 'lock_lost', 'lock_busy'].map(transition =>
          [transition, finished.filter(line => line.transition === transition).length]))
        expect(transitions.completed).toBe(total)
        const [provider] = await sql<Array<{ requests: number }>>`select sum(requests)::int as requests from payment_intents`
        console.log(`FLUSHALL ×${flushCount} during a drain of ${total} jobs: attempts finished ${JSON.stringify(transitions)}; `
          + `provider asked ${provider!.requests} times for ${orderIds.length} intents`)
      }, 120_000)
    })
  })

  it('a standalone worker without DATABASE_URL exits with code 1 naming DATABASE_URL', async () => {
    // The environment startWorker builds, minus the database.
    const env = appEnv({ redisUrl, label: 'no-database' })
    for (const name of ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY']) Reflect.deleteProperty(env, name)
    const child = spawnManaged({
      label: 'no-database',
      args: [`${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`, 'scripts/worker.ts'],
      env: { ...env, LOG_LEVEL: 'info', WORKER_ID: 'no-database' },
    })
    try {
      expect(await child.exited).toBe(1)
      expect(child.output()).toContain('The standalone worker needs DATABASE_URL')
      expect(child.output()).not.toContain('"msg":"worker started"')
    }
    finally {
      await child.stop()
    }
  })
})

/** Every process below `pid`, children first. */
function descendantsOf(pid: number): number[] {
  let children: number[]
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number)
  }
  catch {
    return [] // pgrep exits 1 when there are none
  }
  return children.flatMap(child => [child, ...descendantsOf(child)])
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  }
  catch {
    return false
  }
}
