import { getHeader, type H3Event } from 'h3'
import { useConfig } from '../config'

/**
 * Test-only fault injection (docs/testing.md#faults-tests-only), active only with
 * FAULTS_ENABLED=true. Reproduces the classic incident: the server committed, the client never
 * heard, the client retried.
 */

export class InjectedFault extends Error {
  constructor() {
    super('fail-before-commit fault injected')
    this.name = 'InjectedFault'
  }
}

export interface CommitFaults {
  /** Runs inside the transaction, after the business writes and before COMMIT. */
  beforeCommit?: () => Promise<void>
  /** Runs after COMMIT and before the response; `true` means the response must not be sent. */
  afterCommit?: (event: H3Event) => Promise<boolean>
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))
const FAULT_PATTERN = /^(delay-before-commit|delay-after-commit)=(\d{1,6})$|^(drop-after-commit|crash-after-commit|fail-before-commit)$/

export function readCommitFaults(event: H3Event): CommitFaults {
  const header = getHeader(event, 'x-fault')
  if (!header || !useConfig().FAULTS_ENABLED) return {}
  const match = FAULT_PATTERN.exec(header.trim())
  if (!match) return {}
  const [, delayed, ms, named] = match
  switch (delayed ?? named) {
    case 'delay-before-commit': return { beforeCommit: async () => { await sleep(Number(ms)) } }
    case 'fail-before-commit': return { beforeCommit: async () => { throw new InjectedFault() } }
    case 'delay-after-commit': return {
      afterCommit: async () => {
        await sleep(Number(ms))
        return false
      },
    }
    case 'drop-after-commit': return {
      afterCommit: async (e) => {
        dropConnection(e)
        return true
      },
    }
    case 'crash-after-commit': return {
      afterCommit: async () => {
        process.kill(process.pid, 'SIGKILL')
        return true
      },
    }
    default: return {}
  }
}

/**
 * Ends the client's connection without a byte of the response. Under `nuxt dev` the client talks to
 * the dev server's proxy, not to this socket: a destroyed socket there ends in an error the proxy
 * never answers, and the client waits for its own timeout. A response head whose body never comes
 * makes the proxy destroy its client's connection, before it has sent it anything.
 */
function dropConnection(event: H3Event): void {
  const socket = event.node.req.socket
  if (!import.meta.dev) {
    socket.destroy()
    return
  }
  event.node.res.writeHead(502)
  event.node.res.flushHeaders()
  socket.end(() => socket.destroy())
}
