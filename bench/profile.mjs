// Where an app process's CPU goes: V8 CPU profiles (`node --cpu-prof`) of the servers, summed and
// grouped by where the code lives — a package under node_modules, Node's own modules, the bundled
// server (Nuxt, Nitro, h3 and this app's code, which the build puts in one set of chunks), the
// garbage collector — the bundled server's busiest functions by name, and the native and Node.js
// calls charged to it by the bundled function that made them. V8 samples by the clock: a function is
// also charged while its process is preempted, e.g. by the Postgres backend its socket write woke on
// the same core (docs/benchmarks.md says by how much).
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** The group a frame's code belongs to. */
function groupOf({ url, functionName }) {
  if (!url) {
    if (functionName === '(garbage collector)') return 'garbage collector'
    if (functionName === '(program)') return 'V8 and native code outside JavaScript'
    if (functionName === '(root)' || functionName === '(idle)') return functionName
    return 'native code'
  }
  const modules = url.lastIndexOf('/node_modules/')
  if (modules >= 0) {
    const [first, second] = url.slice(modules + '/node_modules/'.length).split('/')
    return first.startsWith('@') ? `${first}/${second}` : first
  }
  if (url.startsWith('node:')) return `Node.js: ${url.slice('node:'.length).replace(/^internal\//, '').split('/')[0]}`
  return 'bundled server (Nuxt, Nitro, h3, app)'
}

const isOwnCode = group => !group.startsWith('Node.js') && group !== 'native code'

/** The nearest caller of a Node.js or native frame whose code is not Node's own: the code it is charged to. */
function nearestOwnCaller(node, parents) {
  for (let parent = parents.get(node.id); parent; parent = parents.get(parent.id)) {
    if (isOwnCode(groupOf(parent.callFrame))) return parent
  }
  return undefined
}

/**
 * Node's modules and native functions (a socket write, a hash) are charged to the code that called
 * them: `native code ← postgres` is time postgres.js spent in native calls such as its socket writes.
 * With it, for a call charged to the bundled server, the call named by the bundled function that
 * made it (`writev ← sendResponse`): the native time the table of groups lumps together.
 */
function chargedGroup(node, parents) {
  const group = groupOf(node.callFrame)
  if (isOwnCode(group)) return { group }
  const caller = nearestOwnCaller(node, parents)
  if (!caller) return { group }
  const callerGroup = groupOf(caller.callFrame)
  const nativeCall = callerGroup.startsWith('bundled server') ? `${node.callFrame.functionName || '(anonymous)'} ← ${frameName(caller.callFrame)}` : undefined
  return { group: `${group} ← ${callerGroup}`, nativeCall }
}

const frameName = callFrame => `${callFrame.functionName || '(anonymous)'} (${callFrame.url.split('/').pop()}:${callFrame.lineNumber + 1})`

/** Self time of every node of one profile, in microseconds, by node id. */
function selfTimes(profile) {
  const times = new Map()
  profile.samples.forEach((id, index) => times.set(id, (times.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0)))
  return times
}

/**
 * Sums the profiles in `dir` (one per process). Resolves to the busy time in ms (idle left out), the
 * groups and the bundled server's top functions, each with its ms and share of the busy time.
 */
export function summarizeProfiles(dir, topFunctions = 12) {
  const groups = new Map()
  const functions = new Map()
  const nativeCalls = new Map()
  let busyUs = 0
  for (const file of readdirSync(dir).filter(name => name.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'))
    const times = selfTimes(profile)
    const parents = new Map()
    for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node)
    for (const node of profile.nodes) {
      const us = times.get(node.id) ?? 0
      if (!us || node.callFrame.functionName === '(idle)') continue
      busyUs += us
      const { group, nativeCall } = chargedGroup(node, parents)
      groups.set(group, (groups.get(group) ?? 0) + us)
      if (group.startsWith('bundled server')) {
        const name = frameName(node.callFrame)
        functions.set(name, (functions.get(name) ?? 0) + us)
      }
      if (nativeCall) nativeCalls.set(nativeCall, (nativeCalls.get(nativeCall) ?? 0) + us)
    }
  }
  const ranked = (map, limit) => [...map].sort((a, b) => b[1] - a[1]).slice(0, limit)
    .map(([name, us]) => ({ name, ms: us / 1000, share: us / busyUs }))
  return { busyMs: busyUs / 1000, groups: ranked(groups, 20), functions: ranked(functions, topFunctions), nativeCalls: ranked(nativeCalls, topFunctions) }
}
