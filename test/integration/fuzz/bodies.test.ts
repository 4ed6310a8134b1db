/**
 * JSON request bodies of the operations the OpenAPI document describes, fuzzed through the real HTTP
 * app: valid and near-valid bodies generated from the document's request schemas, arbitrary JSON of
 * the wrong shape, duplicate members, odd Unicode, bodies around the 16 KiB limit, deep nesting and
 * every kind of Content-Type. Each answer must satisfy the invariants (support/invariants.ts) and
 * the outcome the document and the HttpApi schema predict.
 */
import { Exit, Schema } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ExchangeRatesRequest, SubscribeRequest } from "../../../src/api/schemas.ts"
import { testCoins, testCurrencies } from "../../../src/rates/testRates.ts"
import {
  anyJson,
  type Hints,
  nearValidFrom,
  nestedJson,
  objectText,
  oddUnicode,
  sprinkleUnicode,
  validFrom
} from "../../support/fuzz/arbitraries.ts"
import { expectNoViolations, type FuzzTarget, fuzzParams, startFuzzTarget } from "../../support/fuzz/harness.ts"
import { jsonOf } from "../../support/fuzz/invariants.ts"
import type { OperationModel } from "../../support/fuzz/openapi.ts"

const LIMIT = 16 * 1024

let target: FuzzTarget
beforeAll(async () => {
  target = await startFuzzTarget()
})
afterAll(() => target.close())

/** The HttpApi schema and parse options each operation decodes its body with (src/api/Api.ts). */
const serverSchemas: Record<string, { schema: Schema.Top; options: { onExcessProperty?: "error" } }> = {
  getHistoricalExchangeRates: { schema: ExchangeRatesRequest, options: {} },
  subscribeToUpdates: { schema: SubscribeRequest, options: { onExcessProperty: "error" } }
}
const acceptedByServerSchema = (operationId: string, value: unknown) => {
  const { schema, options } = serverSchemas[operationId]!
  return Exit.isSuccess(Schema.decodeUnknownExit(schema as Schema.Codec<unknown, unknown>)(value, options))
}

/** Steers generation toward values the fakes know, so that 200s are common too. */
const hints: Record<string, Hints> = {
  getHistoricalExchangeRates: {
    "/cryptos/*": fc.constantFrom("BTC", "eth", "Sol", "DOGE", "btc", "DOWN", "BUSY"),
    "/currency": fc.constantFrom("usd", "EUR", "gbp", "JpY", "chf")
  },
  subscribeToUpdates: {
    "/email": fc.constantFrom("reader@example.com", "Reader.Name+tag@Example.ORG", "invalid@example.com", "down@example.com", "a@bücher.example")
  }
}

/**
 * What the app must answer for a body that is valid per schema, given the in-memory fakes behind it
 * (RatesProviderTest: BTC, ETH, SOL; DOWN → 502, BUSY → 503; usd, eur, gbp, jpy. NewsletterMemory:
 * local part "invalid" → 400 invalid_email, "down" → 502).
 */
const expectedForValid = (operationId: string, body: any): { status: number; code?: string; pointer?: string } | "email-dependent" => {
  if (operationId === "getHistoricalExchangeRates") {
    const symbols = [...new Set<string>(body.cryptos.map((s: string) => s.toUpperCase()))]
    if (symbols.includes("DOWN")) return { status: 502, code: "upstream_error" }
    if (symbols.includes("BUSY")) return { status: 503, code: "service_unavailable" }
    if (!testCurrencies.has(String(body.currency ?? "usd").toLowerCase())) return { status: 400, code: "validation_failed", pointer: "/currency" }
    return symbols.some((s) => testCoins.has(s)) ? { status: 200 } : { status: 400, code: "no_valid_symbols" }
  }
  return "email-dependent"
}

const post = (op: OperationModel, body: string | Buffer, contentType: string | undefined = "application/json", extra: ReadonlyArray<readonly [string, string]> = []) =>
  target.exchange({
    method: "POST",
    path: op.path,
    headers: [...(contentType === undefined ? [] : [["Content-Type", contentType] as const]), ...extra],
    body
  })

const jsonOperations = () => target.model.operations.filter((o) => o.requestMediaType === "application/json")

/** Checks a decoded body's answer against the schema verdict and the fakes' behaviour. */
const checkOutcome = (op: OperationModel, value: unknown, res: { status: number }, body: any, context: string) => {
  const valid = acceptedByServerSchema(op.operationId, value)
  if (!valid) {
    expect(res.status, context).toBe(400)
    expect(body?.code, context).toBe("validation_failed")
    expect(Array.isArray(body?.errors) && body.errors.length > 0, `${context}: errors[] with pointers`).toBe(true)
    return
  }
  const expected = expectedForValid(op.operationId, value)
  if (expected === "email-dependent") {
    const local = String((value as { email: string }).email).trim()
    const localPart = local.slice(0, local.lastIndexOf("@")).toLowerCase()
    if (res.status === 200) return
    if (res.status === 502) return expect(localPart, context).toBe("down")
    expect(res.status, context).toBe(400)
    if (body.code === "invalid_email") return expect(localPart, context).toBe("invalid")
    expect(body.code, context).toBe("validation_failed")
    expect(body.errors.map((e: { pointer: string }) => e.pointer), context).toEqual(["/email"])
    return
  }
  expect(res.status, context).toBe(expected.status)
  if (expected.code !== undefined) expect(body?.code, context).toBe(expected.code)
  if (expected.pointer !== undefined) expect(body.errors.map((e: { pointer: string }) => e.pointer), context).toEqual([expected.pointer])
  if (res.status === 200 && op.operationId === "getHistoricalExchangeRates") {
    // Every requested symbol comes back once, either with rates or in `unknown`, upper-cased, in order.
    const requested = [...new Set((value as { cryptos: Array<string> }).cryptos.map((s) => s.toUpperCase()))]
    const answered = [...body.rates.map((r: { symbol: string }) => r.symbol), ...body.unknown]
    expect([...answered].sort(), context).toEqual([...requested].sort())
  }
}

describe("the document's request schemas agree with the HttpApi schemas", () => {
  // No HTTP: a disagreement means the published contract and the server's decoding differ.
  it("Ajv (OpenAPI 3.1 document) and Effect Schema give the same verdict on generated bodies", () => {
    for (const op of jsonOperations()) {
      const schema = op.requestSchema as object
      const arb = fc.oneof(validFrom(target.model, schema, hints[op.operationId]), nearValidFrom(target.model, schema, hints[op.operationId])!, anyJson)
      fc.assert(
        fc.property(arb, (value) => {
          const byDocument = op.validateRequest!(value).length === 0
          expect(byDocument, `${op.operationId} ${JSON.stringify(value)}: document says ${byDocument}`).toBe(acceptedByServerSchema(op.operationId, value))
        }),
        fuzzParams(1_500)
      )
    }
  })
})

describe.each(["getHistoricalExchangeRates", "subscribeToUpdates"])("%s bodies", (operationId) => {
  const op = () => target.model.byId(operationId)

  it("valid and near-valid bodies from the document: invariants and the predicted outcome", async () => {
    const schema = op().requestSchema as object
    const arb = fc.oneof(
      validFrom(target.model, schema, hints[operationId]),
      nearValidFrom(target.model, schema, hints[operationId])!
    )
    await fc.assert(
      fc.asyncProperty(arb, async (value) => {
        const checked = await post(op(), JSON.stringify(value))
        const context = `POST ${op().path} ${JSON.stringify(value)}`
        expectNoViolations(checked, context)
        checkOutcome(op(), value, checked.response, jsonOf(checked.response), context)
      }),
      fuzzParams(250)
    )
  })

  it("arbitrary JSON of any shape (wrong types at the root and inside)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(anyJson, fc.jsonValue({ maxDepth: 6 })), async (value) => {
        const checked = await post(op(), JSON.stringify(value))
        const context = `POST ${op().path} ${JSON.stringify(value)}`
        expectNoViolations(checked, context)
        checkOutcome(op(), value, checked.response, jsonOf(checked.response), context)
      }),
      fuzzParams(120)
    )
  })

  it("odd Unicode in any string of a valid or near-valid body (lone surrogates, RTL, NUL, emoji)", async () => {
    const schema = op().requestSchema as object
    const base = fc.oneof(validFrom(target.model, schema, hints[operationId]), nearValidFrom(target.model, schema, hints[operationId])!)
    const keyed = fc.tuple(base, oddUnicode).map(([v, k]) => (typeof v === "object" && v !== null && !Array.isArray(v) ? { ...v, [k]: "x" } : v))
    await fc.assert(
      fc.asyncProperty(fc.oneof(base.chain(sprinkleUnicode), keyed), async (value) => {
        const checked = await post(op(), JSON.stringify(value))
        const context = `POST ${op().path} ${JSON.stringify(value)}`
        expectNoViolations(checked, context)
        checkOutcome(op(), value, checked.response, jsonOf(checked.response), context)
      }),
      fuzzParams(200)
    )
  })

  it("duplicate members: the answer is the one for the last occurrence (JSON.parse semantics)", async () => {
    const schema = op().requestSchema as object
    const members = validFrom(target.model, schema, hints[operationId]).chain((valid) => {
      const entries = Object.entries(valid as object)
      return fc.tuple(fc.constantFrom(...entries.map(([k]) => k)), anyJson, fc.boolean()).map(([key, other, otherFirst]) => {
        const dup: [string, unknown] = [key, other]
        const list: Array<readonly [string, unknown]> = otherFirst ? [dup, ...entries] : [...entries, dup]
        return list
      })
    })
    await fc.assert(
      fc.asyncProperty(members, async (list) => {
        const text = objectText(list)
        const checked = await post(op(), text)
        const context = `POST ${op().path} ${text}`
        expectNoViolations(checked, context)
        checkOutcome(op(), JSON.parse(text), checked.response, jsonOf(checked.response), context)
      }),
      fuzzParams(80)
    )
  })

  it("invalid UTF-8 and non-JSON bytes: 400, never a 5xx", async () => {
    const bytes = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a)),
      fc.tuple(fc.constantFrom('{"cryptos":["', '{"email":"', '{"'), fc.uint8Array({ minLength: 1, maxLength: 8 }), fc.constantFrom('"]}', '@example.com","locale":"en"}', '":1}'))
        .map(([a, mid, b]) => Buffer.concat([Buffer.from(a), Buffer.from(mid.map((x) => x | 0x80)), Buffer.from(b)])),
      fc.constantFrom("", " ", "{", "[", "nul", "NaN", "Infinity", "{'a':1}", '{"a":1,}', "01", "1e400", '"\\ud800"', "\u0000")
    )
    await fc.assert(
      fc.asyncProperty(bytes, async (body) => {
        const checked = await post(op(), body)
        expectNoViolations(checked, `POST ${op().path} bytes ${Buffer.from(body).toString("hex").slice(0, 80)}`)
      }),
      fuzzParams(100)
    )
  })
})

describe("body size and depth against the 16 KiB limit", () => {
  const rates = () => target.model.byId("getHistoricalExchangeRates")
  const subscribe = () => target.model.byId("subscribeToUpdates")

  /** A valid rates body padded with an ignored member to exactly `size` bytes. */
  const ratesBodyOfSize = (size: number) => {
    const head = '{"cryptos":["BTC"],"pad":"'
    const tail = '"}'
    return head + "x".repeat(Math.max(0, size - head.length - tail.length)) + tail
  }

  it("bodies up to 16 KiB are read, larger ones are 413, with Content-Length or chunked", async () => {
    const sizes = fc.oneof(fc.integer({ min: LIMIT - 64, max: LIMIT + 64 }), fc.integer({ min: 1_000, max: 64 * 1024 }))
    await fc.assert(
      fc.asyncProperty(sizes, fc.option(fc.integer({ min: 512, max: 8_192 }), { nil: undefined }), async (size, chunkSize) => {
        const body = ratesBodyOfSize(size)
        const checked = await target.exchange({
          method: "POST",
          path: rates().path,
          headers: [["Content-Type", "application/json"]],
          body,
          ...(chunkSize === undefined ? {} : { chunkSize })
        })
        const context = `${body.length}-byte body${chunkSize === undefined ? "" : `, chunked by ${chunkSize}`}`
        expectNoViolations(checked, context)
        expect(checked.response.status, context).toBe(body.length > LIMIT ? 413 : 200)
      }),
      fuzzParams(60)
    )
  })

  it("a declared Content-Length over the limit is refused before the body is sent", async () => {
    // Nothing but the headers is written: a server that waited for the body would time out here.
    const checked = await target.exchangeBytes(
      `POST ${subscribe().path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT + 1}\r\nConnection: close\r\n\r\n`,
      { method: "POST", target: subscribe().path }
    )
    expectNoViolations(checked, "Content-Length over the limit, no body")
    expect(checked.response.status).toBe(413)
  })

  it("deeply nested JSON within the limit is answered; beyond it, 413", async () => {
    const depth = fc.oneof(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 1_000, max: 8_000 }), fc.integer({ min: 9_000, max: 30_000 }))
    await fc.assert(
      fc.asyncProperty(depth, fc.constantFrom("array", "object") as fc.Arbitrary<"array" | "object">, fc.constantFrom("pad", "cryptos", "root"), async (d, kind, where) => {
        const nested = nestedJson(d, kind)
        const body = where === "root" ? nested : `{"cryptos":${where === "cryptos" ? nested : '["ETH"]'},"pad":${where === "pad" ? nested : "0"}}`
        const checked = await post(rates(), body)
        const context = `depth ${d} ${kind} at ${where} (${body.length} bytes)`
        expectNoViolations(checked, context)
        if (body.length > LIMIT) expect(checked.response.status, context).toBe(413)
        else expect(checked.response.status, context).toBe(where === "pad" ? 200 : 400)
      }),
      fuzzParams(40)
    )
  })

  it("a huge string or array in a member the schema bounds is a 400, not a crash", async () => {
    const cases = fc.oneof(
      fc.integer({ min: 51, max: 3_000 }).map((n) => ({ op: "rates", body: JSON.stringify({ cryptos: Array.from({ length: n }, () => "BTC") }) })),
      fc.integer({ min: 255, max: 16_000 }).map((n) => ({ op: "subscribe", body: JSON.stringify({ email: `${"a".repeat(n)}@example.com`, locale: "en" }) })),
      fc.integer({ min: 100, max: 16_000 }).map((n) => ({ op: "rates", body: JSON.stringify({ cryptos: ["x".repeat(n)] }) }))
    )
    await fc.assert(
      fc.asyncProperty(cases, async ({ op, body }) => {
        const checked = await post(op === "rates" ? rates() : subscribe(), body)
        const context = `${op} ${body.length} bytes`
        expectNoViolations(checked, context)
        expect(checked.response.status, context).toBe(body.length > LIMIT ? 413 : 400)
      }),
      fuzzParams(40)
    )
  })
})

describe("Content-Type and Content-Encoding of JSON bodies", () => {
  const jsonTypes = fc.oneof(
    fc.constantFrom("application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "application/json;charset=UTF-8", "application/json ; charset=\"utf-8\""),
    fc.tuple(fc.constantFrom("application/json", "Application/Json"), fc.constantFrom("", ";", "; v=1", "; charset=utf-8; q=1")).map(([t, p]) => t + p)
  )
  const otherTypes = fc.oneof(
    fc.constantFrom(
      "text/plain",
      "text/json",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/xml",
      "application/octet-stream",
      "application/jsonx",
      "application/json-patch+json",
      "application/problem+json",
      "application/vnd.api+json",
      "json",
      "*/*",
      "application/*",
      "application",
      ";",
      "application/ json"
    ),
    fc.stringMatching(/^[a-z]{1,8}\/[a-z0-9.+-]{1,12}$/).filter((t) => t !== "application/json")
  )

  it("application/json in any case and with parameters is read; any other media type is 415 with Accept", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("getHistoricalExchangeRates", "subscribeToUpdates"), fc.oneof(jsonTypes.map((t) => ({ t, json: true })), otherTypes.map((t) => ({ t, json: false }))), async (operationId, { t, json }) => {
        const op = target.model.byId(operationId)
        const body = operationId === "subscribeToUpdates" ? { email: "ct@example.com", locale: "en" } : { cryptos: ["BTC"] }
        const checked = await post(op, JSON.stringify(body), t)
        const context = `POST ${op.path} Content-Type: ${t}`
        expectNoViolations(checked, context)
        if (json) expect(checked.response.status, context).toBe(200)
        else {
          expect(checked.response.status, context).toBe(415)
          expect(checked.response.headers["accept"], context).toBe("application/json")
        }
      }),
      fuzzParams(120)
    )
  })

  it("a body without Content-Type is read as JSON (documented: accepted, not 415)", async () => {
    // C8 requires 415 for a non-JSON Content-Type; a missing one is tolerated. Pinned so a change is deliberate.
    const checked = await post(target.model.byId("getHistoricalExchangeRates"), JSON.stringify({ cryptos: ["BTC"] }), undefined)
    expectNoViolations(checked, "no Content-Type")
    expect(checked.response.status).toBe(200)
  })

  it("a compressed body (Content-Encoding other than identity) is 415 with Accept-Encoding, not parsed as JSON", async () => {
    const { gzipSync } = await import("node:zlib")
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("gzip", "deflate", "br", "compress", "x-custom", "GZIP", "gzip, identity"), fc.boolean(), async (coding, reallyCompressed) => {
        const op = target.model.byId("getHistoricalExchangeRates")
        const plain = JSON.stringify({ cryptos: ["BTC"] })
        const checked = await post(op, reallyCompressed ? gzipSync(plain) : plain, "application/json", [["Content-Encoding", coding]])
        const context = `Content-Encoding: ${coding} (${reallyCompressed ? "compressed" : "plain"} body)`
        expectNoViolations(checked, context)
        expect(checked.response.status, context).toBe(415)
        expect(checked.response.headers["accept-encoding"], context).toBe("identity")
      }),
      fuzzParams(20)
    )
    const identity = await post(target.model.byId("getHistoricalExchangeRates"), JSON.stringify({ cryptos: ["BTC"] }), "application/json", [["Content-Encoding", "identity"]])
    expect(identity.response.status).toBe(200)
  })
})
