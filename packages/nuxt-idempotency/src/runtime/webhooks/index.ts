// Webhook signature schemes, transport-free: Standard Webhooks (and Svix), Stripe, Midtrans.
export * from './signing'
export * from './standard'
export * from './stripe'
export * from './midtrans'
