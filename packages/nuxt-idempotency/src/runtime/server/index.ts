// The Nitro side of the layer, for explicit imports (the same functions are auto-imported).
export * from './handler'
export * from '../core/problems'
export * from './services'
export * from './webhooks'
