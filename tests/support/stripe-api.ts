/** The Stripe stand-in, kept beside `npm run stand-in` in scripts/stand-ins; the suites import it from here. */
export type { ProviderCall, ProviderFault, ScriptedFault, WebhookDelivery } from '../../scripts/stand-ins/common'
export { StandInRefusal } from '../../scripts/stand-ins/common'
export * from '../../scripts/stand-ins/stripe'
