import { mountSuspended, registerEndpoint } from '@nuxt/test-utils/runtime'
import { defineEventHandler, getHeader, readBody, setResponseHeader, setResponseStatus } from 'h3'
import { expect, vi } from 'vitest'
import { type Component, defineComponent, h } from 'vue'
import type { OpsJob } from '#shared/ops-api'
import { type OpsContext, provideOps, useOps } from '~/composables/useOps'

/** The operator token the mounted console components are signed in with. */
export const opsToken = 'ops-component-test-token'

/**
 * A host for one console component: the console's context (as pages/ops.vue provides it), signed
 * in with `opsToken`. `context()` is that context, to read what the component asked of it.
 */
export function consoleHost(component: Component, props: Record<string, unknown> = {}) {
  let context: OpsContext | undefined
  const Host = defineComponent({
    setup() {
      sessionStorage.setItem('ops:token', opsToken)
      const ops = useOps()
      ops.restore()
      provideOps(ops)
      context = ops
      return () => h(component, props)
    },
  })
  return { Host, context: () => context! }
}

/** Mounts a console list panel in `consoleHost` and waits until it shows `rows` rows matching `rowSelector`. */
export async function mountPanel(component: Component, rowSelector: string, rows = 1) {
  const { Host } = consoleHost(component)
  const wrapper = await mountSuspended(Host)
  await vi.waitFor(() => expect(wrapper.findAll(rowSelector)).toHaveLength(rows))
  return wrapper
}

/** What the stand-in for the server was sent to an operator action (a POST). */
export interface ActionCall { authorization: string | undefined, body: unknown }

/**
 * A stand-in for the server behind one list panel: GET `listPath` lists `rows`; each POST to
 * `actionPath` is recorded in `calls` and answered as `answer` says (a status of 400 or more as a
 * problem document). `unregister` takes both routes away again.
 */
export function serveListAction(listPath: string, rows: unknown[], actionPath: string, answer: (call: ActionCall) => { status: number, body: unknown }) {
  const calls: ActionCall[] = []
  const unregister = [
    registerEndpoint(listPath, () => ({ object: 'list', data: rows })),
    registerEndpoint(actionPath, {
      method: 'POST',
      handler: defineEventHandler(async (event) => {
        const call = { authorization: getHeader(event, 'authorization'), body: await readBody(event) }
        calls.push(call)
        const { status, body } = answer(call)
        setResponseStatus(event, status)
        if (status >= 400) setResponseHeader(event, 'content-type', 'application/problem+json')
        return body
      }),
    }),
  ]
  return { calls, unregister: () => unregister.forEach(stop => stop()) }
}

/** A job as GET /api/ops/jobs lists it: a dead letter of a webhook event for a missing order. */
export function deadLetter(overrides: Partial<OpsJob> = {}): OpsJob {
  return {
    id: 'job_01JDEAD',
    kind: 'webhook.apply',
    dedupeKey: 'webhook.apply:msg_1',
    payload: {},
    status: 'dead_letter',
    attempt: 8,
    maxAttempts: 8,
    snoozes: 0,
    runAt: '2026-12-01T09:14:03.120Z',
    lastError: 'order ord_01JMISSING not found',
    errors: [],
    resourceId: 'order:ord_01JMISSING',
    idempotencyKey: null,
    requestId: 'req_01JENQUEUE',
    lockedBy: null,
    fence: null,
    faults: null,
    startedAt: null,
    heartbeatAt: null,
    completedAt: null,
    dismissedReason: null,
    dismissedAt: null,
    createdAt: '2026-12-01T09:00:00.000Z',
    updatedAt: '2026-12-01T09:14:03.120Z',
    ...overrides,
  }
}
