/**
 * Traces exported over OTLP change no answer: with OTEL_EXPORTER_OTLP_ENDPOINT set, a repeated rates
 * query is still a ready answer of the edge, and every request, whoever answers it (the edge's refusals,
 * a ready answer, the HttpApi), gets one server span from the edge (src/observability/requestSpan.ts),
 * named and annotated as Effect's own, with its request id and status; the handlers' spans are its
 * children. The spans go to a collector of ours (OTLP/JSON over HTTP), read once the app is closed
 * (closing flushes the exporter).
 */
import { createServer, type IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import { Context, Effect, Layer, References, Tracer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeRequestSpans } from "../../../src/observability/requestSpan.ts"
import { RatesProvider } from "../../../src/rates/RatesProvider.ts"
import { countingRatesProvider } from "../../support/rates.ts"
import type { Env } from "../../support/config.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"

interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string | undefined
  readonly name: string
  /** OTLP SpanKind: 2 server. */
  readonly kind: number
  /** OTLP StatusCode: 1 ok, 2 error. */
  readonly status: { readonly code: number }
  readonly attributes: Record<string, unknown>
}

interface OtlpValue {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly boolValue?: boolean
  readonly doubleValue?: number
}

/** An OTLP/HTTP collector: every span of every /v1/traces request, attributes as a record. */
const startCollector = async () => {
  const spans: Array<ExportedSpan> = []
  const server = createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8").on("data", (chunk: string) => (body += chunk)).on("end", () => {
      if (req.url === "/v1/traces") {
        const data = JSON.parse(body) as {
          resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Omit<ExportedSpan, "attributes"> & { attributes: Array<{ key: string; value: OtlpValue }> }> }> }>
        }
        for (const resource of data.resourceSpans) {
          for (const scope of resource.scopeSpans) {
            for (const span of scope.spans) {
              const attributes = Object.fromEntries(span.attributes.map(({ key, value }) =>
                [key, value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.boolValue ?? value.doubleValue]))
              spans.push({ ...span, attributes })
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

let collector: Awaited<ReturnType<typeof startCollector>>
beforeAll(async () => {
  collector = await startCollector()
})
afterAll(() => collector.close())

/** Runs `requests` on an app exporting to the collector, closes it (its spans flushed), returns the spans it made. */
const traced = async (
  options: { readonly rates?: Layer.Layer<RatesProvider, unknown>; readonly env?: Env },
  requests: (app: TestApp) => Promise<void>
) => {
  const app = await startTestApp({ ...options, env: { ...options.env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } })
  const from = collector.spans.length
  try {
    await requests(app)
  } finally {
    await app.close()
  }
  return collector.spans.slice(from)
}

/** The server spans of the response's request (by the request id it carries): exactly one is expected. */
const serverSpansOf = (spans: ReadonlyArray<ExportedSpan>, res: Response) =>
  spans.filter((span) => span.kind === 2 && span.attributes["http.response.header.x-request-id"] === res.headers.get("x-request-id"))

const QUERY = JSON.stringify({ cryptos: ["BTC", "ETH"], days: 7 })
const post = (app: TestApp, path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${app.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

/** The counting fake, each call of the HttpApi's handler in a span of its own. */
const spannedRates = () => {
  const counting = countingRatesProvider(() => Date.now() + 60_000)
  const layer = Layer.effect(
    RatesProvider,
    Effect.map(RatesProvider, (inner) =>
      RatesProvider.of({
        latestPrices: inner.latestPrices,
        historical: (query) =>
          query.symbols.includes("DEFECT")
            ? Effect.die(new Error("test: a bug in the rates use case"))
            : inner.historical(query).pipe(Effect.withSpan("test.historical"))
      }))
  ).pipe(Layer.provide(counting.layer))
  return { layer, calls: counting.calls }
}

describe("with traces exported", () => {
  it("a repeated rates query is still the edge's ready answer, and exports its server span", async () => {
    const rates = spannedRates()
    const answers: Array<Response> = []
    const asked: Array<number> = []
    const spans = await traced({ rates: rates.layer }, async (app) => {
      for (let i = 0; i < 2; i++) {
        answers.push(await post(app, "/api/v1/exchange-rates", QUERY, { "user-agent": "tracing-test/1" }))
        asked.push(rates.calls.historical)
      }
    })
    const [first, again] = answers
    expect([first!.status, again!.status]).toEqual([200, 200])
    expect(await again!.text()).toBe(await first!.text())
    // The HttpApi's handler was asked the first time only: the repeat never reached it.
    expect(asked).toEqual([1, 1])
    const [span, ...others] = serverSpansOf(spans, again!)
    expect(others).toEqual([])
    expect(span).toMatchObject({
      name: "POST",
      status: { code: 1 },
      attributes: {
        "http.request.method": "POST",
        "http.route": "/api/v1/exchange-rates",
        "http.response.status_code": 200,
        "url.path": "/api/v1/exchange-rates",
        "url.scheme": "http",
        "server.address": "127.0.0.1",
        "client.address": "127.0.0.1",
        "user_agent.original": "tracing-test/1"
      }
    })
    // No handler ran under it.
    expect(spans.filter((s) => s.parentSpanId === span!.spanId)).toEqual([])
  })

  it("health, answered ready, exports its span", async () => {
    let health: Response | undefined
    const spans = await traced({}, async (app) => {
      health = await fetch(`${app.url}/api/health`)
    })
    expect(health!.status).toBe(200)
    expect(serverSpansOf(spans, health!)).toEqual([expect.objectContaining({
      name: "GET",
      attributes: expect.objectContaining({ "http.route": "/api/health", "http.response.status_code": 200 })
    })])
  })

  it("a request the HttpApi answers has one server span, the edge's, and the handler's span is its child", async () => {
    const rates = spannedRates()
    let res: Response | undefined
    const spans = await traced({ rates: rates.layer }, async (app) => {
      res = await post(app, "/api/v1/exchange-rates", QUERY)
    })
    expect(res!.status).toBe(200)
    const [server, ...others] = serverSpansOf(spans, res!)
    expect(others).toEqual([])
    const handler = spans.find((s) => s.name === "test.historical")
    expect(handler).toMatchObject({ traceId: server!.traceId, parentSpanId: server!.spanId })
    // One request, one server span: the HttpApi made none of its own.
    expect(spans.filter((s) => s.kind === 2)).toEqual([server])
  })

  it("the edge's refusals get their span too, with their status", async () => {
    const answers: Record<string, Response> = {}
    const spans = await traced({ env: { RATE_LIMIT_SUBSCRIBE_PER_MIN: "1" } }, async (app) => {
      answers.notFound = await fetch(`${app.url}/api/nowhere`)
      answers.method = await fetch(`${app.url}/api/health`, { method: "DELETE" })
      answers.malformed = await post(app, "/api/v1/exchange-rates", "{\"cryptos\":[")
      answers.invalid = await post(app, "/api/v1/exchange-rates", JSON.stringify({ cryptos: [] }))
      answers.subscribed = await post(app, "/api/subscribe", JSON.stringify({ email: "reader@example.com", locale: "en" }))
      answers.limited = await post(app, "/api/subscribe", JSON.stringify({ email: "reader@example.com", locale: "en" }))
    })
    const statuses = Object.fromEntries(Object.entries(answers).map(([name, res]) => [name, res.status]))
    expect(statuses).toEqual({ notFound: 404, method: 405, malformed: 400, invalid: 400, subscribed: 200, limited: 429 })
    for (const [name, res] of Object.entries(answers)) {
      const found = serverSpansOf(spans, res)
      expect(found, name).toHaveLength(1)
      expect(found[0]!.attributes["http.response.status_code"], name).toBe(res.status)
      // Only a 5xx is an error of the server.
      expect(found[0]!.status.code, name).toBe(1)
    }
    expect(serverSpansOf(spans, answers.notFound!)[0]!.attributes["http.route"]).toBeUndefined()
    expect(serverSpansOf(spans, answers.limited!)[0]!.attributes["http.route"]).toBe("/api/subscribe")
  })

  it("a caller's trace context is the span's parent; a defect's 500 is an error", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    const parentId = "00f067aa0ba902b7"
    let res: Response | undefined
    const spans = await traced({ rates: spannedRates().layer }, async (app) => {
      res = await post(app, "/api/v1/exchange-rates", JSON.stringify({ cryptos: ["DEFECT"] }), { traceparent: `00-${traceId}-${parentId}-01` })
    })
    expect(res!.status).toBe(500)
    expect(serverSpansOf(spans, res!)).toEqual([expect.objectContaining({
      traceId,
      parentSpanId: parentId,
      status: expect.objectContaining({ code: 2 }),
      attributes: expect.objectContaining({ "http.response.status_code": 500 })
    })])
  })
})

describe("with traces not exported", () => {
  /** A tracer that counts the spans asked of it (Effect's native one makes them for nobody). */
  const counting = () => {
    const made = { spans: 0 }
    const tracer = Tracer.make({
      span: (options) => {
        made.spans++
        return Tracer.nativeTracer.span(options)
      }
    })
    return { tracer, made }
  }

  it("no span is made (server.ts turns References.TracerEnabled off without an OTLP endpoint)", () => {
    const { tracer, made } = counting()
    const off = Context.make(Tracer.Tracer, tracer).pipe(Context.add(References.TracerEnabled, false))
    expect(makeRequestSpans(off)).toBeUndefined()
    expect(made.spans).toBe(0)
    // The same tracer, enabled: asked for a span per request.
    makeRequestSpans(Context.make(Tracer.Tracer, tracer))!.start({ method: "GET", headers: {} } as IncomingMessage)
    expect(made.spans).toBe(1)
  })
})
