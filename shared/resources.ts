/**
 * How ids of things are spelled where they travel as one string: the resource a job locks
 * (`order:<id>` → lock key `lock:order:<id>`) and the scope an idempotency key belongs to.
 * Built and parsed here only.
 */

const ORDER_RESOURCE_PREFIX = 'order:'

/** The resource of an order's jobs and locks. */
export const orderResource = (orderId: string) => `${ORDER_RESOURCE_PREFIX}${orderId}`

/** The order id of an `order:<id>` resource, or undefined for any other resource. */
export const orderIdOfResource = (resource: string | null | undefined) =>
  resource?.startsWith(ORDER_RESOURCE_PREFIX) ? resource.slice(ORDER_RESOURCE_PREFIX.length) : undefined

/** The Redis key of a resource's processing lock. */
export const resourceLockKey = (resource: string) => `lock:${resource}`

/** A tenant's idempotency keys (orders). */
export const tenantScope = (tenantId: string) => `tenant:${tenantId}`

/** Operators' own keys (a refund from the ops console). */
export const OPS_SCOPE = 'ops'

/** A payment provider's event ids (webhooks and reconciliation). */
export const providerScope = (provider: string) => `provider:${provider}`

/** `provider:%`: every provider's scope, for a LIKE filter. */
export const ANY_PROVIDER_SCOPE = 'provider:%'

export const isProviderScope = (scope: string) => scope.startsWith('provider:')
