/**
 * A bounded in-process map whose entries expire: the least recently used entries go first when it
 * is full. The bound is a total weight: one per entry by default, or what `weigh` says (e.g. bytes,
 * so that a few large values cannot hold more memory than many small ones). Only for facts that stay
 * true until their expiry (see the callers), never as a source of truth: each instance has its own,
 * and losing it only costs a database read.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V, expiresAt: number, weight: number }>()
  private totalWeight = 0

  constructor(private readonly maxWeight: number, private readonly weigh: (value: V) => number = () => 1) {}

  get(key: string, now = Date.now()): V | undefined {
    const entry = this.entries.get(key)
    if (!entry) return undefined
    this.entries.delete(key)
    if (entry.expiresAt <= now) {
      this.totalWeight -= entry.weight
      return undefined
    }
    // Re-inserted last: Map iteration order is the recency order.
    this.entries.set(key, entry)
    return entry.value
  }

  set(key: string, value: V, expiresAt: number): void {
    this.delete(key)
    const weight = this.weigh(value)
    if (weight > this.maxWeight) return
    for (const [oldest, entry] of this.entries) {
      if (this.totalWeight + weight <= this.maxWeight) break
      this.entries.delete(oldest)
      this.totalWeight -= entry.weight
    }
    this.entries.set(key, { value, expiresAt, weight })
    this.totalWeight += weight
  }

  delete(key: string): void {
    const entry = this.entries.get(key)
    if (!entry) return
    this.entries.delete(key)
    this.totalWeight -= entry.weight
  }

  get size(): number {
    return this.entries.size
  }

  /** The sum of the entries' weights (their count without `weigh`). */
  get weight(): number {
    return this.totalWeight
  }
}
