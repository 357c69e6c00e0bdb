import { getHeader, type H3Event } from 'h3'
import { useConfig } from '../config'

/**
 * Test-only fault injection (SPEC §9), active only with FAULTS_ENABLED=true. Reproduces the
 * classic incident: the server committed, the client never heard, the client retried.
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
    case 'delay-after-commit': return { afterCommit: async () => { await sleep(Number(ms)); return false } }
    case 'drop-after-commit': return {
      afterCommit: async (e) => {
        e.node.req.socket.destroy()
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
