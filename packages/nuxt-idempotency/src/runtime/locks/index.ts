// Short-lived processing locks: Redis (any topology ioredis speaks) or in-process, one contract.
export * from './types'
export * from './memory'
export * from './redis'
