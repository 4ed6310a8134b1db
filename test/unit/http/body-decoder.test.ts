/** bodyDecoder: a small JSON body decoded as the HttpApi would, a repeated one from memory. */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema, SchemaParser } from "effect"
import { makeBodyDecoder, unparsable } from "../../../src/http/bodyDecoder.ts"

const Query = Schema.Struct({ cryptos: Schema.Array(Schema.String), days: Schema.optional(Schema.Number) })
const bytes = (text: string) => new TextEncoder().encode(text)

type Bounds = { maxEntries: number; maxBytes: number }
const counted = (bounds?: { decoded: Bounds; refused: Bounds }) => {
  let calls = 0
  const decode = SchemaParser.decodeUnknownExit(Query)
  const decoder = makeBodyDecoder((json) => {
    calls++
    return decode(json)
  }, bounds)
  return { decoder, calls: () => calls }
}

describe("makeBodyDecoder", () => {
  it("decodes a body once; the same text again comes from memory, frozen", () => {
    const { decoder, calls } = counted()
    const first = decoder(bytes("{\"cryptos\":[\"BTC\"],\"days\":7}"))
    const again = decoder(bytes("{\"cryptos\":[\"BTC\"],\"days\":7}"))
    assert.isTrue(Exit.isExit(first) && Exit.isSuccess(first))
    assert.isTrue(Exit.isExit(again) && Exit.isSuccess(again))
    assert.deepStrictEqual((again as Exit.Success<unknown>).value, { cryptos: ["BTC"], days: 7 })
    assert.isTrue(Object.isFrozen((again as Exit.Success<{ cryptos: Array<string> }>).value.cryptos))
    assert.strictEqual(calls(), 1)
  })

  it("remembers refusals too, apart: distinct junk never evicts a body that decodes", () => {
    const { decoder, calls } = counted({ decoded: { maxEntries: 2, maxBytes: 1024 }, refused: { maxEntries: 2, maxBytes: 1024 } })
    for (let i = 0; i < 3; i++) {
      const result = decoder(bytes("{\"cryptos\":\"BTC\"}"))
      assert.isTrue(Exit.isExit(result) && Exit.isFailure(result))
    }
    assert.strictEqual(calls(), 1)
    decoder(bytes("{\"cryptos\":[]}"))
    for (let i = 0; i < 10; i++) decoder(bytes(`{"cryptos":${i}}`))
    decoder(bytes("{\"cryptos\":[]}"))
    assert.strictEqual(calls(), 12) // the good body was decoded once
  })

  it("a body that is not JSON is unparsable, never decoded; a UTF-8 BOM is dropped as the platform does", () => {
    const { decoder, calls } = counted()
    assert.strictEqual(decoder(bytes("{\"cryptos\":[")), unparsable)
    assert.strictEqual(decoder(bytes("{\"cryptos\":[")), unparsable)
    assert.strictEqual(calls(), 0)
    const bom = decoder(new Uint8Array([0xef, 0xbb, 0xbf, ...bytes("{\"cryptos\":[]}")]))
    assert.isTrue(Exit.isExit(bom) && Exit.isSuccess(bom))
  })

  it("keeps the stack trace limit as it was, also after junk", () => {
    const { decoder } = counted()
    const before = Error.stackTraceLimit
    decoder(bytes("nope"))
    assert.strictEqual(Error.stackTraceLimit, before)
  })

  it("remembers within its bounds", () => {
    const { decoder, calls } = counted({ decoded: { maxEntries: 2, maxBytes: 1024 }, refused: { maxEntries: 2, maxBytes: 1024 } })
    for (const n of [1, 2, 3, 1]) decoder(bytes(`{"cryptos":[],"days":${n}}`))
    assert.strictEqual(calls(), 4) // days 1 was evicted by days 3
  })
})
