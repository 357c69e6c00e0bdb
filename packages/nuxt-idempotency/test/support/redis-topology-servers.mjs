// Redis topologies as child processes, for the tests and the benchmarks (plain ESM, typed by
// redis-topology-servers.d.mts): a Redis Cluster of masters, a master with a replica behind Sentinels (with
// a failover on demand), and a Redis that speaks only TLS with a certificate from a CA made at run
// time. Every server runs on free ports with its files in a temporary folder; all are killed, and
// their folders removed, when stopped or when the process exits.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import tls from 'node:tls'
import { freePort } from './ports.mjs'
import { makeTestCertificates } from './test-certificates.mjs'

export { freePort }

const redisServerBinary = process.env.REDIS_SERVER_BINARY ?? '/usr/bin/redis-server'
const redisCliBinary = process.env.REDIS_CLI_BINARY ?? '/usr/bin/redis-cli'
const host = '127.0.0.1'
const startTimeoutMs = 15_000

/** @type {Set<{ child: import('node:child_process').ChildProcess }>} */
const running = new Set()
/** @type {Set<string>} */
const folders = new Set()

process.on('exit', () => {
  for (const server of running) server.child.kill('SIGKILL')
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

function temporaryFolder(label) {
  const folder = mkdtempSync(join(tmpdir(), `ic-redis-${label}-`))
  folders.add(folder)
  return folder
}

function removeFolder(folder) {
  rmSync(folder, { recursive: true, force: true })
  folders.delete(folder)
}

/**
 * One command over a fresh connection (RESP inline is not enough for arguments with spaces, so the
 * command is sent as a RESP array). Resolves to the reply: a string, a number, null, an array, or an
 * Error for an error reply. Rejects when the server cannot be reached within timeoutMs.
 */
export function command(port, args, options = {}) {
  const { timeoutMs = 2_000, tls: tlsOptions } = options
  return new Promise((resolve, reject) => {
    const socket = tlsOptions ? tls.connect({ host, port, ...tlsOptions }) : net.connect({ host, port })
    let buffer = Buffer.alloc(0)
    const fail = (error) => {
      socket.destroy()
      reject(error)
    }
    socket.setTimeout(timeoutMs, () => fail(new Error(`no answer from 127.0.0.1:${port} to ${args[0]} within ${timeoutMs} ms`)))
    socket.once(tlsOptions ? 'secureConnect' : 'connect', () => {
      socket.write(`*${args.length}\r\n${args.map(arg => `$${Buffer.byteLength(String(arg))}\r\n${arg}\r\n`).join('')}`)
    })
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      const parsed = parseReply(buffer, 0)
      if (!parsed) return
      socket.destroy()
      resolve(parsed.value)
    })
    socket.once('error', fail)
  })
}

/** One RESP2 reply from buffer at offset, or undefined while it is incomplete. */
function parseReply(buffer, offset) {
  const end = buffer.indexOf('\r\n', offset)
  if (end < 0) return undefined
  const type = String.fromCharCode(buffer[offset])
  const line = buffer.toString('utf8', offset + 1, end)
  const next = end + 2
  if (type === '+') return { value: line, next }
  if (type === '-') return { value: new Error(line), next }
  if (type === ':') return { value: Number(line), next }
  if (type === '$') {
    const length = Number(line)
    if (length < 0) return { value: null, next }
    if (buffer.length < next + length + 2) return undefined
    return { value: buffer.toString('utf8', next, next + length), next: next + length + 2 }
  }
  if (type === '*') {
    const count = Number(line)
    if (count < 0) return { value: null, next }
    const values = []
    let position = next
    for (let index = 0; index < count; index++) {
      const item = parseReply(buffer, position)
      if (!item) return undefined
      values.push(item.value)
      position = item.next
    }
    return { value: values, next: position }
  }
  throw new Error(`unexpected RESP reply type ${JSON.stringify(type)}`)
}

async function until(description, check, timeoutMs = startTimeoutMs, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs
  let last
  while (Date.now() < deadline) {
    try {
      last = await check()
      if (last === true) return
    }
    catch (error) {
      last = error
    }
    await sleep(intervalMs)
  }
  throw new Error(`${description}: not within ${timeoutMs / 1000} s (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`)
}

/**
 * Starts `redis-server` with `args` and resolves once it answers PING on `port` (over TLS with
 * `tlsOptions`). The returned handle kills it (SIGKILL, as a crash) and resolves once it has exited.
 */
async function launch(label, port, args, tlsOptions) {
  const child = spawn(redisServerBinary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk) => { output += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk })
  let exited = false
  const closed = new Promise((resolve) => {
    child.once('close', () => {
      exited = true
      resolve()
    })
    child.once('error', (error) => {
      output += `\n[spawn error] ${error.message}\n`
      exited = true
      resolve()
    })
  })
  const server = {
    child,
    port,
    output: () => output,
    async kill() {
      if (!exited) child.kill('SIGKILL')
      await closed
      running.delete(server)
    },
  }
  running.add(server)
  const deadline = Date.now() + startTimeoutMs
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${label} (redis-server on port ${port}) exited before answering:\n${output}`)
    if (await command(port, ['PING'], { timeoutMs: 500, tls: tlsOptions }).then(reply => reply === 'PONG', () => false)) return server
    await sleep(50)
  }
  await server.kill()
  throw new Error(`${label} (redis-server on port ${port}) did not answer PING within ${startTimeoutMs / 1000} s:\n${output}`)
}

/**
 * launch() on `count` ports found free just before. Another process can take one in between (an
 * outgoing connection is given a port from the same ephemeral range), so a server that could not
 * bind is started again on new ports, up to three times. `argsOf(ports)` gives its arguments.
 */
async function launchOnFreePorts(label, count, argsOf, tlsOptions) {
  for (let attempt = 1; ; attempt++) {
    const ports = []
    for (let index = 0; index < count; index++) ports.push(await freePort())
    try {
      return await launch(label, ports[0], argsOf(ports), tlsOptions)
    }
    catch (error) {
      if (attempt === 3 || !String(error?.message).includes('Address already in use')) throw error
    }
  }
}

const ephemeral = ['--save', '', '--appendonly', 'no', '--daemonize', 'no', '--bind', host]

/**
 * A Redis Cluster of `masters` masters (3 at least), each with `replicas` replicas (default none),
 * its 16384 slots spread by `redis-cli --cluster create`; resolves once every node reports
 * `cluster_state:ok` and every replica is in sync.
 */
export async function startRedisCluster(options = {}) {
  const { masters = 3, replicas = 0 } = options
  const folder = temporaryFolder('cluster')
  const servers = []
  const stop = async () => {
    await Promise.all(servers.map(server => server.kill()))
    removeFolder(folder)
  }
  const dead = new Set()
  const living = () => servers.map(server => server.port).filter(port => !dead.has(port))
  /** Every living node says cluster_state:ok, and every replica's link to its master is up. */
  const healthy = async () => {
    const infos = await Promise.all(living().map(async port => [await command(port, ['CLUSTER', 'INFO']), await command(port, ['INFO', 'replication'])]))
    return infos.every(([cluster, replication]) => String(cluster).includes('cluster_state:ok')
      && (String(replication).includes('role:master') || String(replication).includes('master_link_status:up')))
  }
  try {
    for (let index = 0; index < masters * (1 + replicas); index++) {
      // The bus port is chosen too: the default (port + 10000) may be taken or past 65535.
      servers.push(await launchOnFreePorts(`cluster node ${index + 1}`, 2, ([port, busPort]) => [
        '--port', String(port), '--cluster-port', String(busPort), ...ephemeral,
        '--cluster-enabled', 'yes', '--cluster-config-file', join(folder, `nodes-${port}.conf`),
        '--cluster-node-timeout', '2000', '--repl-diskless-sync-delay', '0', '--dir', folder,
      ]))
    }
    const addresses = servers.map(server => `${host}:${server.port}`)
    const created = await run(redisCliBinary, ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'])
    if (created.code !== 0) throw new Error(`redis-cli --cluster create failed (exit code ${created.code}):\n${created.output}`)
    await until('every cluster node reports cluster_state:ok and every replica is in sync', healthy)
  }
  catch (error) {
    await stop()
    throw error
  }
  const ports = servers.map(server => server.port)
  const slotRanges = async () => /** @type {any[]} */ (await command(living()[0], ['CLUSTER', 'SLOTS']))
  const ownerOfSlot = async (slot) => {
    const range = (await slotRanges()).find(([first, last]) => first <= slot && slot <= last)
    return Number(range[2][1])
  }
  return {
    nodes: ports.map(port => ({ host, port })),
    nodesSetting: ports.map(port => `${host}:${port}`).join(','),
    ports,
    masterPorts: async () => [...new Set((await slotRanges()).map(range => Number(range[2][1])))].sort((a, b) => a - b),
    keySlot: async key => Number(await command(living()[0], ['CLUSTER', 'KEYSLOT', key])),
    ownerOfSlot,
    async kill(port) {
      dead.add(port)
      await servers.find(server => server.port === port)?.kill()
    },
    untilHealthy: (timeoutMs = 20_000) => until('the cluster is whole again (cluster_state:ok on every living node)', async () => {
      if (!(await healthy())) return false
      const owners = (await slotRanges()).map(range => Number(range[2][1]))
      return owners.every(port => !dead.has(port))
    }, timeoutMs, 100),
    async moveSlot(slot, toPort) {
      const fromPort = await ownerOfSlot(slot)
      if (fromPort === toPort) return
      const [fromId, toId] = await Promise.all([command(fromPort, ['CLUSTER', 'MYID']), command(toPort, ['CLUSTER', 'MYID'])])
      const expectOk = (reply, what) => {
        if (reply !== 'OK' && reply !== 'NOKEY') throw new Error(`${what}: ${reply instanceof Error ? reply.message : JSON.stringify(reply)}`)
      }
      // The documented live resharding of one slot: importing, migrating, its keys moved, then owned.
      expectOk(await command(toPort, ['CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId]), 'SETSLOT IMPORTING')
      expectOk(await command(fromPort, ['CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId]), 'SETSLOT MIGRATING')
      for (;;) {
        const keys = await command(fromPort, ['CLUSTER', 'GETKEYSINSLOT', slot, 100])
        if (!Array.isArray(keys) || keys.length === 0) break
        expectOk(await command(fromPort, ['MIGRATE', host, toPort, '', 0, 5000, 'KEYS', ...keys]), 'MIGRATE')
      }
      for (const port of [toPort, fromPort, ...living().filter(port => port !== toPort && port !== fromPort)]) {
        expectOk(await command(port, ['CLUSTER', 'SETSLOT', slot, 'NODE', toId]), 'SETSLOT NODE')
      }
      await until(`every node names 127.0.0.1:${toPort} as the owner of slot ${slot}`, async () => {
        const owners = await Promise.all(living().map(async (port) => {
          const ranges = /** @type {any[]} */ (await command(port, ['CLUSTER', 'SLOTS']))
          return Number(ranges.find(([first, last]) => first <= slot && slot <= last)?.[2][1])
        }))
        return owners.every(owner => owner === toPort)
      })
    },
    stop,
  }
}

/**
 * A master and a replica (`--replicaof`) watched by `sentinels` Sentinels (1 to 3; quorum 1 with
 * one sentinel, else 2) under the name `name`, with short down-after and failover timeouts; resolves
 * once every sentinel knows the replica. `failover()` asks a sentinel to fail over (SENTINEL
 * FAILOVER) and resolves once every sentinel names the former replica as the master (about a
 * second). The former master keeps its role until the sentinels turn it into a replica, some 8 s
 * later (Sentinel's own delay); `{ untilDemoted: true }` waits for that too.
 */
export async function startRedisSentinel(options = {}) {
  const { sentinels: sentinelCount = 1, name = 'mymaster' } = options
  const folder = temporaryFolder('sentinel')
  const data = []
  const sentinels = []
  const stop = async () => {
    await Promise.all([...sentinels, ...data].map(server => server.kill()))
    removeFolder(folder)
  }
  const masterAddress = async (sentinelPort = sentinels[0].port) => {
    const reply = await command(sentinelPort, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name])
    if (!Array.isArray(reply)) throw new Error(`sentinel on ${sentinelPort} does not know ${name}: ${reply}`)
    return { host: reply[0], port: Number(reply[1]) }
  }
  const replicasKnown = async (sentinelPort) => {
    const reply = await command(sentinelPort, ['SENTINEL', 'REPLICAS', name])
    return Array.isArray(reply) ? reply.length : 0
  }
  try {
    // No wait before a diskless full sync (5 s by default): the replica is in sync at once.
    const replication = ['--repl-diskless-sync-delay', '0']
    const master = await launchOnFreePorts('sentinel master', 1, ([port]) => ['--port', String(port), ...ephemeral, ...replication, '--dir', folder])
    data.push(master)
    const masterPort = master.port
    const replica = await launchOnFreePorts('sentinel replica', 1, ([port]) => ['--port', String(port), ...ephemeral, ...replication, '--dir', folder, '--replicaof', host, String(masterPort)])
    data.push(replica)
    const replicaPort = replica.port
    await until('the replica is in sync', async () => String(await command(replicaPort, ['INFO', 'replication'])).includes('master_link_status:up'))
    const quorum = sentinelCount === 1 ? 1 : 2
    for (let index = 0; index < sentinelCount; index++) {
      const port = await freePort()
      const file = join(folder, `sentinel-${port}.conf`)
      writeFileSync(file, [
        `port ${port}`,
        `bind ${host}`,
        `dir ${folder}`,
        `sentinel monitor ${name} ${host} ${masterPort} ${quorum}`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 5000`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'))
      sentinels.push(await launch(`sentinel ${index + 1}`, port, [file, '--sentinel']))
    }
    await until('every sentinel knows the replica', async () =>
      (await Promise.all(sentinels.map(sentinel => replicasKnown(sentinel.port)))).every(count => count >= 1))
  }
  catch (error) {
    await stop()
    throw error
  }

  const dataPorts = () => data.map(server => server.port)
  return {
    name,
    sentinels: sentinels.map(sentinel => ({ host, port: sentinel.port })),
    sentinelsSetting: sentinels.map(sentinel => `${host}:${sentinel.port}`).join(','),
    dataPorts,
    masterAddress: () => masterAddress(),
    async failover(failoverOptions = {}) {
      const from = await masterAddress()
      const [to] = dataPorts().filter(port => port !== from.port)
      // A failover just finished may still be settling ("INPROG"): ask again until one starts.
      await until(`SENTINEL FAILOVER ${name} accepted`, async () => {
        const reply = await command(sentinels[0].port, ['SENTINEL', 'FAILOVER', name])
        if (reply instanceof Error) throw reply
        return reply === 'OK'
      }, 20_000, 200)
      await until(`every sentinel names 127.0.0.1:${to} as the master of ${name}`, async () =>
        (await Promise.all(sentinels.map(sentinel => masterAddress(sentinel.port)))).every(address => address.port === to), 20_000)
      if (!failoverOptions.untilDemoted) return { from: from.port, to }
      await until(`127.0.0.1:${to} is a master and 127.0.0.1:${from.port} its replica`, async () => {
        const [promoted, demoted] = await Promise.all([command(to, ['ROLE']), command(from.port, ['ROLE'])])
        return Array.isArray(promoted) && promoted[0] === 'master' && Array.isArray(demoted) && demoted[0] === 'slave' && Number(demoted[2]) === to
      }, 20_000)
      return { from: from.port, to }
    },
    stop,
  }
}

/**
 * A Redis that listens only for TLS (`--port 0 --tls-port`), its certificate (for 127.0.0.1 and
 * localhost) signed by a CA generated with openssl into a temporary folder; `caFile` is that CA's
 * PEM. Clients are not asked for certificates. It listens on 127.0.0.2 too, a name the certificate
 * does not carry.
 */
export async function startTlsRedis() {
  const folder = temporaryFolder('tls')
  let server
  const stop = async () => {
    await server?.kill()
    removeFolder(folder)
  }
  try {
    const certificates = await makeTestCertificates(folder)
    const port = await freePort()
    const ca = certificates.ca
    // Also on 127.0.0.2, an address the certificate does not name, to show that the name is checked.
    server = await launch('TLS redis', port, [
      '--port', '0', '--tls-port', String(port), ...ephemeral, '--bind', `${host} 127.0.0.2`, '--dir', folder,
      '--tls-cert-file', certificates.certFile, '--tls-key-file', certificates.keyFile, '--tls-ca-cert-file', certificates.caFile,
      '--tls-auth-clients', 'no',
    ], { ca })
    return { port, url: `rediss://${host}:${port}`, caFile: certificates.caFile, stop }
  }
  catch (error) {
    await stop()
    throw error
  }
}

/** Whether this redis-server was built with TLS (Debian's is): it then complains about the missing certificate instead. */
export async function redisHasTls() {
  const { output } = await run(redisServerBinary, ['--port', '0', '--tls-port', String(await freePort()), '--save', ''], undefined, 3_000)
  return /tls-cert-file|Failed to configure TLS/i.test(output) && !/not built with TLS|Bad directive|Unrecognized/i.test(output)
}

function run(file, args, cwd, timeoutMs = 30_000) {
  return new Promise((resolve) => {
    const child = spawn(file, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (chunk) => { output += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('error', (error) => {
      clearTimeout(timer)
      resolve({ code: null, output: `${output}\n[spawn error] ${error.message}` })
    })
    child.once('close', (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}
