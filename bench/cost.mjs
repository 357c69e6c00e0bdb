// What an order costs the machine, per process kind: CPU time of the app's processes, of a separate
// worker process, of a payment provider's stand-in in its own process, of every Postgres process
// (backends, WAL writer, checkpointer, autovacuum) but the bench's own connections' backends, of Redis
// and of the bench's own process (the load generator), read from /proc/<pid>/stat (utime + stime)
// before and after a measured run; and the write transactions Postgres committed meanwhile, as the
// number of transaction ids it handed out. Linux only.
import { readdirSync, readFileSync } from 'node:fs'

// /proc reports CPU time in USER_HZ ticks, 100 per second on every Linux the kernel ABI allows.
const MS_PER_TICK = 10

function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces and parentheses): state is the first, utime the 12th, stime the 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(fields[11]) + Number(fields[12])
  }
  catch {
    return undefined // the process has exited
  }
}

/** Pids of the processes whose command name is `name` (as /proc/<pid>/comm has it). */
function pidsNamed(name) {
  const pids = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) pids.push(Number(entry))
    }
    catch {
      // gone between the listing and the read
    }
  }
  return pids
}

/** CPU ticks of a changing set of processes; one that appears later counts from zero. */
function cpuOf(listPids) {
  let before = new Map()
  const read = () => new Map(listPids().map(pid => [pid, cpuTicks(pid)]).filter(([, ticks]) => ticks !== undefined))
  return {
    start() {
      before = read()
    },
    /** Milliseconds of CPU since start(); a process that exited meanwhile is left out. */
    stop() {
      let ticks = 0
      for (const [pid, now] of read()) ticks += now - (before.get(pid) ?? 0)
      return ticks * MS_PER_TICK
    },
  }
}

/**
 * The `application_name` of the bench's own connections to the bench database (bench/run.mjs sets it):
 * their backends' CPU is the bench's (polling for unpaid orders, open jobs, counts), not an order's.
 */
export const benchApplicationName = 'ic-bench'

/** Pids of the bench's own backends (one query on a bench connection, which is one of them). */
async function benchBackends(sql) {
  const rows = await sql`select pid from pg_stat_activity where application_name = ${benchApplicationName}`
  return rows.map(({ pid }) => pid)
}

/** Transaction ids handed out so far: one per transaction that wrote (the reading takes one itself). */
async function transactionIds(sql) {
  const [{ xid }] = await sql`select txid_current()::text as xid`
  return Number(xid)
}

/**
 * Meters a run: `appPids()` and `workerPids()` list the app's and a separate worker's processes,
 * `providerPids()` (if given) a payment provider's stand-in's: its figure is `cpuMs.provider`.
 * `stop(units)` divides every figure by the units the run produced (orders created, or replays served).
 */
export function costMeter(sql, { appPids, workerPids = () => [], providerPids }) {
  const ownBackends = new Set()
  const meters = {
    app: cpuOf(appPids),
    worker: cpuOf(workerPids),
    ...(providerPids && { provider: cpuOf(providerPids) }),
    postgres: cpuOf(() => pidsNamed('postgres').filter(pid => !ownBackends.has(pid))),
    redis: cpuOf(() => pidsNamed('redis-server')),
    // autocannon runs in this process: what sending the requests and reading the answers cost.
    loadGenerator: cpuOf(() => [process.pid]),
  }
  let xidsBefore
  return {
    async start() {
      for (const pid of await benchBackends(sql)) ownBackends.add(pid)
      for (const meter of Object.values(meters)) meter.start()
      xidsBefore = await transactionIds(sql)
    },
    async stop(units) {
      const xids = await transactionIds(sql) - xidsBefore - 1
      // A connection the bench opened meanwhile is its own too: left out of both readings.
      for (const pid of await benchBackends(sql)) ownBackends.add(pid)
      const cpu = Object.fromEntries(Object.entries(meters).map(([name, meter]) => [name, meter.stop() / units]))
      return { units, cpuMs: cpu, writeCommits: xids / units }
    },
  }
}
