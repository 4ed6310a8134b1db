import { assert, describe, it } from "@effect/vitest"
import { emulatedCoinById } from "../../emulators/coingecko-data.ts"
import { curatedCoinFor, curatedCoins } from "../../../src/rates/symbols.ts"

describe("curated symbols", () => {
  it("maps the well-known tickers, ETH to Ethereum itself", () => {
    assert.deepStrictEqual(curatedCoinFor("ETH"), { id: "ethereum", name: "Ethereum" })
    assert.strictEqual(curatedCoinFor("btc")?.id, "bitcoin")
    assert.strictEqual(curatedCoinFor("USDT")?.id, "tether")
    assert.isAtLeast(curatedCoins.size, 30)
    assert.isUndefined(curatedCoinFor("PEPE"), "left to the upstream lookup")
  })

  it("has upper-case tickers and one ticker per coin", () => {
    const ids = [...curatedCoins.values()].map((c) => c.id)
    assert.strictEqual(new Set(ids).size, ids.length)
    for (const symbol of curatedCoins.keys()) assert.match(symbol, /^[A-Z0-9]+$/)
  })

  it("every curated coin exists in the emulator, with the same ticker", () => {
    for (const [symbol, { id, name }] of curatedCoins) {
      const coin = emulatedCoinById.get(id)
      assert.isDefined(coin, id)
      assert.strictEqual(coin!.symbol, symbol.toLowerCase())
      assert.strictEqual(coin!.name, name)
    }
  })
})
