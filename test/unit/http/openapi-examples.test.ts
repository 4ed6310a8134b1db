/**
 * The OpenAPI document is a true reference (issue 15.4): every request example, posted as it is, is
 * answered 200; every example validates against its own schema (JSON Schema 2020-12, the dialect of
 * OpenAPI 3.1) and decodes with the contract's Effect schema; schemas have the contract's names.
 */
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Problems from "../../../src/api/problems.ts"
import * as Contract from "../../../src/api/schemas.ts"
import { basic, startTestApp, type TestApp } from "../../support/app.ts"
import { BASE } from "../../support/problems.ts"

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020

let app: TestApp
let doc: any
beforeAll(async () => {
  app = await startTestApp()
  doc = await (await fetch(`${app.url}/openapi.json`)).json()
})
afterAll(() => app.close())

const schemaOf = (ref: string) => doc.components.schemas[ref.replace("#/components/schemas/", "")]

/** Every operation that takes a body, with its media type and the example of its body schema. */
const requestExamples = () =>
  Object.entries<any>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item).flatMap(([method, op]) =>
      Object.entries<any>(op.requestBody?.content ?? {}).map(([mediaType, media]) => ({
        path,
        method,
        operationId: op.operationId as string,
        mediaType,
        examples: (schemaOf(media.schema.$ref).examples ?? []) as Array<Record<string, unknown>>
      }))
    )
  )

/** The contract's Effect schema for each component; problems are decoded as the typed client does. */
const effectSchemas: Record<string, Schema.Top> = {
  HealthResponse: Contract.HealthResponse,
  ExchangeRatesRequest: Contract.ExchangeRatesRequest,
  ExchangeRatesResponse: Contract.ExchangeRatesResponse,
  SubscribeRequest: Contract.SubscribeRequest,
  SuccessResponse: Contract.SuccessResponse,
  TokenRequest: Contract.TokenRequest,
  TokenResponse: Contract.TokenResponse,
  OAuthError: Contract.OAuthErrorBody,
  AuthorizationServerMetadata: Contract.AuthorizationServerMetadata,
  JsonWebKeySet: Contract.JsonWebKeySet,
  MalformedJson: Problems.MalformedJson,
  ValidationFailed: Problems.ValidationFailed,
  NoValidSymbols: Problems.NoValidSymbols,
  InvalidEmail: Problems.InvalidEmail,
  InvalidToken: Problems.InvalidToken,
  InsufficientScope: Problems.InsufficientScope,
  MethodNotAllowed: Problems.MethodNotAllowed,
  PayloadTooLarge: Problems.PayloadTooLarge,
  UnsupportedMediaType: Problems.UnsupportedMediaType,
  RateLimited: Problems.RateLimited,
  InternalError: Problems.InternalError,
  UpstreamError: Problems.UpstreamError,
  ServiceUnavailable: Problems.ServiceUnavailable
}

describe("request examples", () => {
  it("exist for every operation that takes a body", () => {
    const found = requestExamples()
    expect(found.map((r) => r.operationId).sort()).toEqual(["getHistoricalExchangeRates", "requestToken", "subscribeToUpdates"])
    for (const r of found) expect(r.examples.length, r.operationId).toBeGreaterThan(0)
  })

  it("are each answered 200 when posted as they are", async () => {
    for (const { path, method, mediaType, examples, operationId } of requestExamples()) {
      for (const example of examples) {
        const form = mediaType === "application/x-www-form-urlencoded"
        const res = await fetch(app.url + path, {
          method: method.toUpperCase(),
          headers: { "content-type": mediaType, ...(form ? { authorization: basic("svc-all", "secret-all") } : {}) },
          body: form ? new URLSearchParams(example as Record<string, string>) : JSON.stringify(example)
        })
        expect(res.status, `${operationId} ${JSON.stringify(example)}: ${await res.clone().text()}`).toBe(200)
      }
    }
  })
})

describe("every example", () => {
  it("is present on every schema, and validates against it", () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    ajv.addVocabulary(["example", "discriminator", "xml", "externalDocs"])
    addFormats(ajv)
    ajv.addSchema({ $id: "https://reference.test/openapi.json", components: doc.components })
    for (const [name, schema] of Object.entries<any>(doc.components.schemas)) {
      expect(schema.examples?.length, `${name} has an example`).toBeGreaterThan(0)
      const validate = ajv.getSchema(`https://reference.test/openapi.json#/components/schemas/${name}`)!
      for (const example of schema.examples) expect(validate(example) ? [] : validate.errors, name).toEqual([])
    }
  })

  it("decodes with the contract's Effect schema", () => {
    for (const [name, schema] of Object.entries(effectSchemas)) {
      const examples = doc.components.schemas[name]?.examples as Array<any> | undefined
      expect(examples, name).toBeDefined()
      for (const example of examples!) {
        // The contract declares problem types relative (src/api/problems.ts); the wire has them absolute.
        const input = typeof example.type === "string" ? { ...example, type: example.type.replace(BASE, "") } : example
        expect(() => Schema.decodeUnknownSync(schema as any)(input), name).not.toThrow()
      }
    }
  })

  it("shows real values, not the generator's placeholders", () => {
    const text = JSON.stringify(doc)
    expect(text).not.toMatch(/9007199254740991|"cryptos":\[""\]|"email":""/)
    expect(doc.components.schemas.ExchangeRatesResponse.examples[0].rates[0].series).toHaveLength(7)
  })

  it("say where each rate comes from: its price's and its series' sources, when its price was observed, the answer's coingecko, coinbase or mixed (CONTRACT C4)", () => {
    const answer = doc.components.schemas.ExchangeRatesResponse
    const rate = schemaOf(answer.properties.rates.items.$ref ?? "") ?? answer.properties.rates.items
    expect(rate.required).toEqual(expect.arrayContaining(["source", "sources", "asOf"]))
    expect(rate.properties.source.enum).toEqual(["coingecko", "coinbase", "mixed"])
    expect(rate.properties.sources.properties.price.enum).toEqual(["coingecko", "coinbase"])
    expect(rate.properties.sources.properties.series.enum).toEqual(["coingecko", "coinbase"])
    expect(rate.properties.asOf.format).toBe("date-time")
    expect(answer.properties.source.enum).toEqual(["coingecko", "coinbase", "mixed"])
    const live = answer.examples.find((example: any) => example.rates.some((r: any) => r.sources.price !== r.sources.series))
    expect(live.rates[0]).toMatchObject({ source: "mixed", sources: { price: "coinbase", series: "coingecko" } })
    for (const example of answer.examples) {
      // asOf is the oldest price's observation; each rate's source is its price's and series' one, or mixed.
      expect(example.asOf).toBe(example.rates.map((r: any) => r.asOf).sort()[0])
      for (const r of example.rates) expect(r.source).toBe(r.sources.price === r.sources.series ? r.sources.price : "mixed")
      expect(example.attribution).toMatch(example.source === "mixed" ? /CoinGecko.*Coinbase Exchange/ : /./)
    }
  })
})

describe("schema names", () => {
  it("are the contract's: no generator suffixes, problems named by their class", () => {
    const names = Object.keys(doc.components.schemas)
    expect(names.filter((n) => n.endsWith("Encoded"))).toEqual([])
    expect(names).toEqual(expect.arrayContaining(["ValidationFailed", "InvalidToken", "RateLimited", "ProblemDetails"]))
    expect(JSON.stringify(doc)).not.toMatch(/Encoded"/)
  })
})
