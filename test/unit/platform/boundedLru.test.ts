/** makeBoundedLru: bounded in entries and bytes, least recently used out first (second chance). */
import { assert, describe, it } from "@effect/vitest"
import { makeBoundedLru } from "../../../src/platform/boundedLru.ts"

const lru = (maxEntries: number, maxBytes = Number.POSITIVE_INFINITY) =>
  makeBoundedLru<string>({ maxEntries, maxBytes, bytesOf: (_, value) => value.length })

describe("makeBoundedLru", () => {
  it("drops the entry not read since it was put, before entries that were read", () => {
    const cache = lru(3)
    cache.put("a", "1")
    cache.put("b", "2")
    cache.put("c", "3")
    cache.get("a")
    cache.get("c")
    cache.put("d", "4")
    assert.isUndefined(cache.get("b"))
    assert.strictEqual(cache.get("a"), "1")
    assert.strictEqual(cache.get("c"), "3")
    assert.strictEqual(cache.get("d"), "4")
  })

  it("a read entry gets one second chance, not a place for ever", () => {
    const cache = lru(2)
    cache.put("a", "1")
    cache.put("b", "2")
    cache.get("a")
    cache.put("c", "3") // a moves to the back, unflagged; b goes
    assert.isUndefined(cache.get("b"))
    cache.put("d", "4") // c, never read, goes
    cache.put("e", "5") // a, not read since its second chance, goes
    assert.deepStrictEqual([cache.get("a"), cache.get("c"), cache.get("d"), cache.get("e")], [undefined, undefined, "4", "5"])
  })

  it("when every entry was read, evicts the oldest of them and keeps what was just put", () => {
    const cache = lru(3)
    for (const k of ["a", "b", "c"]) cache.put(k, k)
    for (const k of ["a", "b", "c"]) cache.get(k)
    cache.put("d", "d")
    assert.deepStrictEqual(cache.size(), { entries: 3, bytes: 3 })
    assert.isUndefined(cache.get("a"))
    assert.strictEqual(cache.get("d"), "d")
  })

  it("with room for one entry, keeps the last one put", () => {
    const cache = lru(1)
    cache.put("a", "a")
    cache.get("a")
    cache.put("b", "b")
    assert.deepStrictEqual([cache.get("a"), cache.get("b")], [undefined, "b"])
  })

  it("stays within its bytes, and keeps nothing larger than the bound", () => {
    const cache = lru(100, 10)
    cache.put("a", "aaaa")
    cache.put("b", "bbbb")
    cache.get("a")
    cache.put("c", "cccc")
    assert.deepStrictEqual(cache.size(), { entries: 2, bytes: 8 })
    assert.isUndefined(cache.get("b"))
    cache.put("big", "x".repeat(11))
    assert.isUndefined(cache.get("big"))
    assert.deepStrictEqual(cache.size(), { entries: 2, bytes: 8 })
  })

  it("replacing a key counts its bytes once; remove frees them", () => {
    const cache = lru(10)
    cache.put("a", "aaaa")
    cache.put("a", "aa")
    assert.deepStrictEqual(cache.size(), { entries: 1, bytes: 2 })
    cache.remove("a")
    assert.deepStrictEqual(cache.size(), { entries: 0, bytes: 0 })
  })
})
