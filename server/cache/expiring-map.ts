/**
 * A bounded in-process map whose entries expire: the least recently used entry goes first when it
 * is full. Only for facts that stay true until their expiry (see the callers), never as a source of
 * truth: each instance has its own, and losing it only costs a database read.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V, expiresAt: number }>()

  constructor(private readonly maxEntries: number) {}

  get(key: string, now = Date.now()): V | undefined {
    const entry = this.entries.get(key)
    if (!entry) return undefined
    this.entries.delete(key)
    if (entry.expiresAt <= now) return undefined
    // Re-inserted last: Map iteration order is the recency order.
    this.entries.set(key, entry)
    return entry.value
  }

  set(key: string, value: V, expiresAt: number): void {
    this.entries.delete(key)
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(key, { value, expiresAt })
  }

  delete(key: string): void {
    this.entries.delete(key)
  }

  get size(): number {
    return this.entries.size
  }
}
