// The transport-free idempotency core: what any server (Nitro, h3, a worker) needs to run an
// operation once per key. The Nitro side lives in ../server.
export * from './run'
export * from './store'
export * from './replay-cache'
export * from './key'
export * from './fingerprint'
export * from './expiring-map'
export * from './migrations'
export * from './problems'
export * from './paced-delete'
