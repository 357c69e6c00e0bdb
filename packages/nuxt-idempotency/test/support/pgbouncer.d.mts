export const pgbouncerBinary: string

export interface Pgbouncer {
  port: number
  /** The same database as `databaseUrl`, through the pooler. */
  urlFor(databaseUrl: string): string
  /** What PgBouncer printed last (20 kB). */
  output(): string
  /** Starts it again (after kill) on the same port. */
  start(): Promise<void>
  /** SIGKILL: every client and server connection is cut at once. */
  kill(): Promise<void>
  destroy(): Promise<void>
}

export function startPgbouncer(options: { serverUrl: string, poolMode?: 'transaction' | 'session', defaultPoolSize?: number }): Promise<Pgbouncer>
