import type { Database } from '@idempotent-checkout/db-kit'
import type { EventHandler, EventHandlerRequest } from 'h3'
import type { Serialize, Simplify } from 'nitropack/types'
import {
  type AtomicIdempotentHandlerContext, type AtomicWebhookHandlerContext, defineIdempotentEventHandler, defineIdempotentWebhookHandler, type IdempotentHandlerContext,
  runOnce, type standardWebhooksProvider, type WebhookHandlerContext,
} from 'nuxt-idempotency/server'
import { describe, expectTypeOf, it } from 'vitest'

// Compile-time only, through the package's published types (what an app sees): `npm run typecheck`
// checks this file (server/tsconfig.json and tsconfig.json include this folder); vitest does not run
// it (not *.test.ts), and nothing here is ever called.
/* eslint-disable @typescript-eslint/no-unused-vars -- handlers defined only for their types */

interface Subscription { id: string, plan: 'pro' | 'team' }
declare const provider: ReturnType<typeof standardWebhooksProvider>

describe('types that flow', () => {
  it('defineIdempotentEventHandler: the handler\'s result is the route\'s, in both modes', () => {
    const leased = defineIdempotentEventHandler(async (): Promise<Subscription> => ({ id: 's1', plan: 'pro' }))
    expectTypeOf<Awaited<ReturnType<typeof leased>>>().toEqualTypeOf<Subscription>()
    expectTypeOf(leased).toEqualTypeOf<EventHandler<EventHandlerRequest, Promise<Subscription>>>()

    const withOptions = defineIdempotentEventHandler({ ttl: 60, handler: () => ({ count: 1 }) })
    expectTypeOf<Awaited<ReturnType<typeof withOptions>>>().toEqualTypeOf<{ count: number }>()

    const atomic = defineIdempotentEventHandler({
      mode: 'atomic',
      handler: async (_event, context) => {
        expectTypeOf(context.tx).toEqualTypeOf<Database>()
        return { id: 's2', plan: 'team' } as Subscription
      },
    })
    expectTypeOf<Awaited<ReturnType<typeof atomic>>>().toEqualTypeOf<Subscription>()
  })

  it('the handler context: tx required in atomic mode, absent in leased mode', () => {
    expectTypeOf<AtomicIdempotentHandlerContext['tx']>().toEqualTypeOf<Database>()
    expectTypeOf<undefined extends AtomicIdempotentHandlerContext['tx'] ? true : false>().toEqualTypeOf<false>()
    expectTypeOf<'tx' extends keyof IdempotentHandlerContext ? true : false>().toEqualTypeOf<false>()

    defineIdempotentEventHandler({
      handler: (_event, context) => {
        expectTypeOf(context).toEqualTypeOf<IdempotentHandlerContext>()
        // @ts-expect-error A leased handler has no transaction.
        return context.tx
      },
    })
    defineIdempotentEventHandler({
      mode: 'leased',
      handler: (_event, context) => {
        expectTypeOf<'tx' extends keyof typeof context ? true : false>().toEqualTypeOf<false>()
        return null
      },
    })
    defineIdempotentEventHandler({
      mode: 'atomic',
      handler: (_event, context) => {
        expectTypeOf(context).toEqualTypeOf<AtomicIdempotentHandlerContext>()
        return null
      },
    })
  })

  it('defineIdempotentWebhookHandler: the handler\'s result, and tx only when atomic', () => {
    const leased = defineIdempotentWebhookHandler(provider, (_event, context) => {
      expectTypeOf(context).toEqualTypeOf<WebhookHandlerContext>()
      expectTypeOf<'tx' extends keyof typeof context ? true : false>().toEqualTypeOf<false>()
      return { handled: context.eventId }
    })
    expectTypeOf<Awaited<ReturnType<typeof leased>>>().toEqualTypeOf<{ handled: string }>()

    const atomic = defineIdempotentWebhookHandler(provider, async (_event, context) => {
      expectTypeOf(context).toEqualTypeOf<AtomicWebhookHandlerContext>()
      expectTypeOf(context.tx).toEqualTypeOf<Database>()
      return { stored: true as const }
    }, { atomic: true })
    expectTypeOf<Awaited<ReturnType<typeof atomic>>>().toEqualTypeOf<{ stored: true }>()
  })

  it('reaches $fetch: a route\'s entry in Nitro\'s InternalApi is the handler\'s result, serialised', () => {
    // What .nuxt/types/nitro-routes.d.ts writes for each route file, applied to an idempotent handler.
    const route = defineIdempotentEventHandler({
      mode: 'atomic',
      storeIf: response => response.status < 300,
      handler: async () => ({ id: 'sub_1', createdAt: new Date(), execution: 1 }),
    })
    type Fetched = Simplify<Serialize<Awaited<ReturnType<typeof route>>>>
    expectTypeOf<Fetched>().toEqualTypeOf<{ id: string, createdAt: string, execution: number }>()
  })

  it('runOnce returns the work\'s awaited result', () => {
    expectTypeOf(runOnce('id', async () => ({ sent: 3 }))).toEqualTypeOf<Promise<{ sent: number }>>()
    expectTypeOf(runOnce('id', () => 'done' as const, { scope: 'mail', ttl: 60, lease: 1000 })).toEqualTypeOf<Promise<'done'>>()
    // @ts-expect-error The options are scope, ttl and lease.
    void runOnce('id', () => 1, { wait: 5 })
  })
})
