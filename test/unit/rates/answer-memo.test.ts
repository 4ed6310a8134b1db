/**
 * RatesAnswerMemo: encoded bodies per normalised query, while fresh, bounded in entries and bytes (LRU);
 * an answer not yet encoded is encoded as HttpApi would encode it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { makeRatesAnswerMemo, memoKey, RatesAnswerMemo, REBUILD_GRACE_MS } from "../../../src/rates/answer.ts"
import type { RatesAnswer, RatesQuery, RatesResult } from "../../../src/rates/RatesProvider.ts"

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0)
const q = (symbols: ReadonlyArray<string>, currency = "usd", days = 30): RatesQuery => ({ symbols, currency, days })
const bytes = (text: string) => new TextEncoder().encode(text)
/** An answer already encoded as `body` (the memo keeps what it is given), holding until `freshUntil`. */
const encoded = (body: Uint8Array, freshUntil: number): RatesAnswer => ({ result: {} as RatesResult, freshUntil, body })

/** A memo whose clock the test sets by hand. */
const withClock = (options?: Parameters<typeof makeRatesAnswerMemo>[1]) => {
  const clock = { now: NOW }
  return { clock, memo: makeRatesAnswerMemo(() => clock.now, options) }
}

describe("RatesAnswerMemo", () => {
  it("keys a query by currency, days and symbols in order", () => {
    assert.strictEqual(memoKey(q(["BTC", "ETH"], "eur", 7)), "eur|7|BTC,ETH")
    const { memo } = withClock()
    const body = bytes("{}")
    memo.remember(q(["BTC", "ETH"]), encoded(body, NOW + 1000))
    assert.strictEqual(memo.recall(q(["BTC", "ETH"])), body)
    assert.isUndefined(memo.recall(q(["ETH", "BTC"])))
    assert.isUndefined(memo.recall(q(["BTC", "ETH"], "eur")))
    assert.isUndefined(memo.recall(q(["BTC", "ETH"], "usd", 7)))
  })

  it("recalls a body until its freshUntil; at it, the repeat is the use case's; keeps none already past", () => {
    const { clock, memo } = withClock()
    const body = bytes("{\"a\":1}")
    memo.remember(q(["BTC"]), encoded(body, NOW + 60_000))
    clock.now = NOW + 59_999
    assert.strictEqual(memo.recall(q(["BTC"])), body)
    clock.now = NOW + 60_000
    assert.isUndefined(memo.recall(q(["BTC"])))
    clock.now = NOW + 60_000 + REBUILD_GRACE_MS
    assert.isUndefined(memo.recall(q(["BTC"])))
    assert.deepStrictEqual(memo.size(), { entries: 0, bytes: 0 }) // an expired entry is dropped when met

    memo.remember(q(["ETH"]), encoded(body, clock.now)) // fresh until now: already past
    memo.remember(q(["SOL"]), encoded(body, 0)) // an answer made of old copies
    assert.isUndefined(memo.recall(q(["ETH"])))
    assert.isUndefined(memo.recall(q(["SOL"])))
    assert.deepStrictEqual(memo.size(), { entries: 0, bytes: 0 })
  })

  it("a newer answer replaces the older one, and one past its freshness forgets it", () => {
    const { memo } = withClock()
    memo.remember(q(["BTC"]), encoded(bytes("old!"), NOW + 1000))
    memo.remember(q(["BTC"]), encoded(bytes("new"), NOW + 2000))
    assert.deepStrictEqual(memo.size(), { entries: 1, bytes: 3 })
    assert.strictEqual(new TextDecoder().decode(memo.recall(q(["BTC"]))), "new")
    memo.remember(q(["BTC"]), encoded(bytes("stale"), 0))
    assert.isUndefined(memo.recall(q(["BTC"])))
    assert.deepStrictEqual(memo.size(), { entries: 0, bytes: 0 })
  })

  it("past its freshness, one repeat rebuilds the answer; the others meanwhile get it as it was, for the grace at most", () => {
    const { clock, memo } = withClock()
    const old = bytes("old")
    memo.remember(q(["BTC"]), encoded(old, NOW + 1000))
    clock.now = NOW + 1000
    // The first repeat past the freshness is let through to the use case, the next ones are not.
    assert.isUndefined(memo.recall(q(["BTC"])))
    assert.strictEqual(memo.recall(q(["BTC"])), old, "a repeat while the answer is rebuilt gets the answer as it was")
    clock.now = NOW + 1000 + REBUILD_GRACE_MS - 1
    assert.strictEqual(memo.recall(q(["BTC"])), old)
    // The rebuilt answer replaces it at once.
    const rebuilt = bytes("new")
    memo.remember(q(["BTC"]), encoded(rebuilt, NOW + 2000))
    assert.strictEqual(memo.recall(q(["BTC"])), rebuilt)
    // A rebuild that never comes (its request failed): after the grace, every repeat is the use case's.
    clock.now = NOW + 2000
    assert.isUndefined(memo.recall(q(["BTC"])))
    assert.strictEqual(memo.recall(q(["BTC"])), rebuilt)
    clock.now = NOW + 2000 + REBUILD_GRACE_MS
    assert.isUndefined(memo.recall(q(["BTC"])))
    assert.isUndefined(memo.recall(q(["BTC"])))
    // A rebuilt answer that is not kept (stale: fresh until 0) takes the old one's place: nothing is sent for it.
    memo.remember(q(["ETH"]), encoded(old, clock.now + 1000))
    clock.now += 1000
    assert.isUndefined(memo.recall(q(["ETH"])))
    memo.remember(q(["ETH"]), encoded(bytes("stale"), 0))
    assert.isUndefined(memo.recall(q(["ETH"])))
  })

  it("holds at most maxEntries, the least recently used out first", () => {
    const { memo } = withClock({ maxEntries: 2 })
    memo.remember(q(["A"]), encoded(bytes("a"), NOW + 1000))
    memo.remember(q(["B"]), encoded(bytes("b"), NOW + 1000))
    assert.isDefined(memo.recall(q(["A"]))) // A is now more recent than B
    memo.remember(q(["C"]), encoded(bytes("c"), NOW + 1000))
    assert.deepStrictEqual(memo.size(), { entries: 2, bytes: 2 })
    assert.isUndefined(memo.recall(q(["B"])))
    assert.isDefined(memo.recall(q(["A"])))
    assert.isDefined(memo.recall(q(["C"])))
  })

  it("holds at most maxBytes of bodies, the least recently used out first; a larger body not at all", () => {
    const { memo } = withClock({ maxBytes: 10 })
    memo.remember(q(["A"]), encoded(bytes("aaaa"), NOW + 1000))
    memo.remember(q(["B"]), encoded(bytes("bbbb"), NOW + 1000))
    assert.isDefined(memo.recall(q(["A"])))
    memo.remember(q(["C"]), encoded(bytes("cccc"), NOW + 1000)) // 12 bytes: B, least recently used, goes
    assert.deepStrictEqual(memo.size(), { entries: 2, bytes: 8 })
    assert.isUndefined(memo.recall(q(["B"])))
    assert.isDefined(memo.recall(q(["A"])))
    assert.isDefined(memo.recall(q(["C"])))

    memo.remember(q(["D"]), encoded(bytes("d".repeat(11)), NOW + 1000))
    assert.isUndefined(memo.recall(q(["D"])))
    assert.deepStrictEqual(memo.size(), { entries: 2, bytes: 8 }) // nothing evicted for it
  })

  it("encodes an answer given without its body, and hands the body back with it", () => {
    const { memo } = withClock()
    const result: RatesResult = {
      currency: "USD",
      days: 1,
      interval: "daily",
      asOf: "2026-11-22T10:00:00Z",
      source: "coingecko",
      stale: false,
      rates: [],
      unknown: ["FOO"],
      attribution: "Data provided by CoinGecko"
    }
    const remembered = memo.remember(q(["FOO"]), { result, freshUntil: NOW + 1000 })
    assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(remembered.body)), result)
    assert.strictEqual(memo.recall(q(["FOO"])), remembered.body)
  })

  it.effect("the Layer tells time by the Clock it is built with (TestClock)", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const memo = yield* RatesAnswerMemo
      const body = bytes("{}")
      memo.remember(q(["BTC"]), encoded(body, NOW + 60_000))
      assert.strictEqual(memo.recall(q(["BTC"])), body)
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual(memo.recall(q(["BTC"])), body)
      yield* TestClock.adjust("1 second")
      assert.isUndefined(memo.recall(q(["BTC"])))
      assert.strictEqual(memo.recall(q(["BTC"])), body)
      yield* TestClock.adjust(`${REBUILD_GRACE_MS} millis`)
      assert.isUndefined(memo.recall(q(["BTC"])))
    }).pipe(Effect.provide(RatesAnswerMemo.layer)))
})
