import type { Database } from '@idempotent-checkout/db-kit'
import { operatorActions } from '../db/schema'

/** What operators can do to tenants, their keys, dead letters, orders, ledger discrepancies and events; each is kept as evidence in `operator_actions`. */
export type OperatorActionName = 'tenant.created' | 'api_key.created' | 'api_key.revoked' | 'job.dismissed' | 'refund.created' | 'ledger_discrepancy.resolved' | 'event.resent'

/** Where an operator action came from: the ops API request (its id), or the CLI (no request). */
export interface OperatorOrigin {
  requestId: string | null
  /** Extra evidence about the origin, e.g. `{via: 'cli'}`; never a secret. */
  detail?: Record<string, unknown>
}

export interface OperatorAction {
  action: OperatorActionName
  /** Null when the subject belongs to no tenant (a dismissed job of no order). */
  tenantId: string | null
  /** The tenant id for tenant.created, the key id for key actions, the job id for job.dismissed, the refund id for refund.created, the discrepancy id for ledger_discrepancy.resolved, the event id for event.resent. */
  subjectId: string
  detail: Record<string, unknown>
}

/** Inserts the action's row; pass the transaction of the change so that both commit or neither does. */
export async function recordOperatorAction(tx: Database, origin: OperatorOrigin, action: OperatorAction): Promise<void> {
  await tx.insert(operatorActions).values({
    action: action.action,
    tenantId: action.tenantId,
    subjectId: action.subjectId,
    requestId: origin.requestId,
    detail: { ...action.detail, ...origin.detail },
  })
}
