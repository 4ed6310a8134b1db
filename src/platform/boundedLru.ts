/**
 * A map bounded in entries and in bytes, the least recently used out first, approximated by second
 * chance (CLOCK): a read only flags its entry, and eviction moves a flagged entry to the back instead
 * of dropping it. Re-inserting on every read (the exact LRU of a Map) makes V8 rebuild a long-lived
 * Map's table in the old generation, which under load costs a major GC a second.
 */
export interface BoundedLru<V> {
  /** The value for `key`, flagged as used; undefined when absent. */
  readonly get: (key: string) => V | undefined
  /** Replaces any value for `key`; a value larger than the byte bound is not kept at all. */
  readonly put: (key: string, value: V) => void
  readonly remove: (key: string) => void
  readonly size: () => { readonly entries: number; readonly bytes: number }
}

interface Slot<V> {
  readonly value: V
  readonly bytes: number
  used: boolean
}

export const makeBoundedLru = <V>(options: {
  readonly maxEntries: number
  readonly maxBytes: number
  readonly bytesOf: (key: string, value: V) => number
}): BoundedLru<V> => {
  const slots = new Map<string, Slot<V>>()
  let bytes = 0
  const remove = (key: string) => {
    const slot = slots.get(key)
    if (slot === undefined) return
    slots.delete(key)
    bytes -= slot.bytes
  }
  return {
    get: (key) => {
      const slot = slots.get(key)
      if (slot === undefined) return undefined
      slot.used = true
      return slot.value
    },
    put: (key, value) => {
      remove(key)
      const size = options.bytesOf(key, value)
      if (size > options.maxBytes) return
      slots.set(key, { value, bytes: size, used: false })
      bytes += size
      while (slots.size > options.maxEntries || bytes > options.maxBytes) {
        const oldest = slots.entries().next()
        if (oldest.done === true) break
        const [oldestKey, slot] = oldest.value
        // A read entry's second chance: to the back, unflagged. The entry just put is kept too (while
        // anything else can go), so what was put can be read at once. Each entry moves once per pass.
        if ((slot.used || oldestKey === key) && slots.size > 1) {
          slot.used = false
          slots.delete(oldestKey)
          slots.set(oldestKey, slot)
        } else {
          remove(oldestKey)
        }
      }
    },
    remove,
    size: () => ({ entries: slots.size, bytes })
  }
}
