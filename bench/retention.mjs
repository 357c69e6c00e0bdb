// Retention capacity: a backlog of rows past their retention in each of the three tables retention
// empties, seeded with generate_series (a million a table in seconds), then the retention task run
// through the ops API, as the scheduler runs it. Helpers only: bench/run.mjs drives them.
import { randomBytes } from 'node:crypto'

/** The defaults of JOB_RETENTION_DAYS and REQUEST_LOG_RETENTION_DAYS (server/config/index.ts); seeded rows are a day older. */
export const RETENTION_DEFAULTS = { jobDays: 7, requestLogDays: 14 }

// What marks the seeded rows, so that expiredRowsLeft counts them and nothing else.
const RECORD_SCOPE = 'bench:retention'
const JOB_KIND = 'bench.retention'
const REQUEST_LOG_INSTANCE = 'bench-retention'

/**
 * Inserts `perTable` rows into each table, all past their retention: idempotency records expired an
 * hour ago with no lease, completed jobs and request-log rows a day older than the default
 * retention. Each table's insert is one statement on its own connection (`sql` needs a pool of 3
 * for them to run at once). Resolves to the rows seeded in all.
 */
export async function seedExpiredRows(sql, perTable) {
  const run = randomBytes(4).toString('hex')
  const jobAge = `${RETENTION_DEFAULTS.jobDays + 1} days`
  const requestLogAge = `${RETENTION_DEFAULTS.requestLogDays + 1} days`
  const [records, jobs, requestLog] = await Promise.all([
    sql`
      insert into idempotency_records (scope, key, route, fingerprint, status, request_id, response_status, response_body, response_headers, created_at, updated_at, expires_at)
      select ${RECORD_SCOPE}, ${run} || '-' || g, 'POST /api/orders', 'bench-fingerprint', 'succeeded', 'req_bench_' || ${run} || '_' || g,
        201, '{"id":"ord_bench"}'::json, '{}'::jsonb, now() - interval '1 day', now() - interval '1 day', now() - interval '1 hour'
      from generate_series(1, ${perTable}::int) g`,
    sql`
      insert into jobs (id, kind, dedupe_key, payload, status, attempt, max_attempts, completed_at, created_at, updated_at)
      select 'job_bench_' || ${run} || '_' || g, ${JOB_KIND}, ${run} || '-' || g, '{}'::jsonb, 'completed', 1, 1,
        now() - ${jobAge}::interval, now() - ${jobAge}::interval, now() - ${jobAge}::interval
      from generate_series(1, ${perTable}::int) g`,
    sql`
      insert into request_log (request_id, method, path, status, duration_ms, instance, created_at)
      select 'req_bench_' || ${run} || '_' || g, 'POST', '/api/orders', 201, 5, ${REQUEST_LOG_INSTANCE}, now() - ${requestLogAge}::interval
      from generate_series(1, ${perTable}::int) g`,
  ])
  // Fresh statistics, as autovacuum would have them for a backlog that grew over days.
  await sql`analyze idempotency_records, jobs, request_log`
  return records.count + jobs.count + requestLog.count
}

/** How many seeded rows are still there: per table and in all. */
export async function expiredRowsLeft(sql) {
  const [row] = await sql`
    select
      (select count(*) from idempotency_records where scope = ${RECORD_SCOPE})::int as "idempotencyRecords",
      (select count(*) from jobs where status = 'completed' and kind = ${JOB_KIND})::int as jobs,
      (select count(*) from request_log where instance = ${REQUEST_LOG_INSTANCE})::int as "requestLog"`
  return { ...row, total: row.idempotencyRecords + row.jobs + row.requestLog }
}

/**
 * Runs retention once through the ops API (`POST /api/ops/tasks/retention:cleanup`: the three
 * tables' retention services in turn, each at its scheduled pace). A service the server's own
 * scheduler was running at that moment answers skipped (its lock is taken): it is asked again on
 * its own (`POST /api/ops/tasks/<service>`) until it runs, its scheduled run being over within its
 * budget. Resolves to the rows deleted per table by these runs, their own durations summed in ms
 * (pauses included; measured by the server) and whether every run drained its backlog (false: a
 * budget ended one, so counts / ms is its full pace).
 */
export async function runRetention(url, opsToken) {
  const runTask = async (name) => {
    const response = await fetch(new URL(`/api/ops/tasks/${name}`, url), {
      method: 'POST',
      headers: { authorization: `Bearer ${opsToken}` },
      // Three runs of up to 18 s each: well past the few seconds some clients allow by default.
      signal: AbortSignal.timeout(120_000),
    })
    const body = await response.json()
    if (!response.ok) throw new Error(`${name} answered ${response.status}: ${JSON.stringify(body)}`)
    return body.result
  }
  const services = { idempotencyRecords: 'retention:records', jobs: 'retention:jobs', requestLog: 'retention:request-log' }
  const cleanup = await runTask('retention:cleanup')
  const runs = Object.fromEntries(Object.entries(services).map(([table, service]) => [table, cleanup?.[service]]))
  for (const [table, service] of Object.entries(services)) {
    for (let attempt = 0; runs[table]?.skipped !== false; attempt++) {
      if (attempt === 30) throw new Error(`${service} did not run here in 30 attempts: ${JSON.stringify(runs[table])}`)
      await new Promise(resolve => setTimeout(resolve, 1000))
      runs[table] = await runTask(service)
    }
  }
  const all = Object.values(runs)
  return {
    counts: Object.fromEntries(Object.entries(runs).map(([table, run]) => [table, run.deleted])),
    ms: all.reduce((sum, run) => sum + run.run.ms, 0),
    drained: all.every(run => run.run.drained),
  }
}

/** Deletes what seedExpiredRows seeded, all at once: a scenario that only needed the backlog there leaves the tables as it found them. */
export async function deleteSeededRows(sql) {
  await sql`delete from idempotency_records where scope = ${RECORD_SCOPE}`
  await sql`delete from jobs where kind = ${JOB_KIND}`
  await sql`delete from request_log where instance = ${REQUEST_LOG_INSTANCE}`
}
