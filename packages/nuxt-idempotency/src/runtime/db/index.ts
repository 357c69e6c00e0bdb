// The database drivers (postgres.js and PGlite) behind one handle, the prepared statements, the
// transactions with after-commit hooks, and the driver errors read the same way on both.
export * from './types'
export * from './client'
export * from './statements'
export * from './transaction'
export * from './errors'
export * from './postgres-options'
export * from './pglite-lock'
export * from './files'
