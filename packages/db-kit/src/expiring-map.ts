/**
 * A bounded in-process map whose entries expire. The bound is a total weight: one per entry by
 * default, or what `weigh` says (e.g. bytes, so that a few large values cannot hold more memory
 * than many small ones). When full, entries leave in insertion order, except that an entry read
 * since it was last passed over gets a second chance (the CLOCK approximation of least recently
 * used): a read only sets a flag, because moving a Map entry on every read (delete + set) costs
 * V8 far more than the read itself on a hot key. Only for facts that stay true until their expiry
 * (see the callers), never as a source of truth: each instance has its own, and losing it only
 * costs a database read.
 */
export class ExpiringMap<V> {
  private readonly entries = new Map<string, { value: V, expiresAt: number, weight: number, read: boolean }>()
  private totalWeight = 0

  constructor(private readonly maxWeight: number, private readonly weigh: (value: V) => number = () => 1) {}

  get(key: string, now = Date.now()): V | undefined {
    const entry = this.entries.get(key)
    if (!entry) return undefined
    if (entry.expiresAt <= now) {
      this.delete(key)
      return undefined
    }
    entry.read = true
    return entry.value
  }

  set(key: string, value: V, expiresAt: number): void {
    this.delete(key)
    const weight = this.weigh(value)
    if (weight > this.maxWeight) return
    while (this.totalWeight + weight > this.maxWeight) this.evictOne()
    this.entries.set(key, { value, expiresAt, weight, read: false })
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

  /** Drops the oldest entry not read since it was last passed over; read ones move to the back, unflagged. */
  private evictOne(): void {
    for (const [key, entry] of this.entries) {
      this.entries.delete(key)
      if (entry.read) {
        entry.read = false
        this.entries.set(key, entry)
        continue
      }
      this.totalWeight -= entry.weight
      return
    }
  }
}
