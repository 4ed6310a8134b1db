/**
 * The edge decodes a GET's query itself (routeTable.ts `decodeQuery`, queryDecoder.ts): what it decodes,
 * and what it refuses with which members, must be what HttpApiBuilder gives the handler or refuses for
 * the same request target. A small HttpApi with a query is served by HttpApiBuilder in process and its
 * answers compared with the route table's decoding of the same targets.
 */
import { Effect, Exit, Layer, Schema, SchemaGetter, SchemaParser } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware } from "effect/http-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeQueryDecoder } from "../../../src/http/queryDecoder.ts"
import { routerConfig, routeTableOf } from "../../../src/http/routeTable.ts"
import { validationFailure } from "../../../src/http/validation.ts"

class QueryProblems extends HttpApiMiddleware.Service<QueryProblems>()("test/QueryProblems") {}

const Name = Schema.String.check(Schema.isMaxLength(4), Schema.isPattern(/^[A-Z+ ]+$/u))
/** A comma-separated list, as a query carries one: split, then each item checked. */
const Names = Schema.String.pipe(Schema.decodeTo(Schema.Array(Name).check(Schema.isMinLength(1), Schema.isMaxLength(3)), {
  decode: SchemaGetter.split(),
  encode: SchemaGetter.transform((names: ReadonlyArray<string>) => names.join(","))
}))

class TestApi extends HttpApi.make("query-test")
  .add(
    HttpApiGroup.make("g").add(
      HttpApiEndpoint.get("list", "/q", {
        query: {
          names: Names,
          tags: Schema.optional(Schema.Array(Name)),
          days: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 365 })))
        },
        success: Schema.String
      })
    ).middleware(QueryProblems)
  )
  .annotate(HttpApi.QueryParseOptions, { errors: "all" })
{}

const Handlers = HttpApiBuilder.group(TestApi, "g", (handlers) =>
  handlers.handle("list", ({ query }) => Effect.succeed(HttpServerResponse.text(JSON.stringify(query)))))

// The HttpApi's refusal, rendered with the members the edge writes for its own (validation.ts).
const QueryProblemsLive = HttpApiMiddleware.layerSchemaErrorTransform(QueryProblems, (error) =>
  Effect.succeed(HttpServerResponse.text(JSON.stringify(validationFailure(error.cause.issue)), { status: 400 })))

const targets = [
  "/q?names=AB",
  "/q?names=AB,CD&days=7",
  "/q?names=AB&names=CD",
  "/q?days=7&days=8&names=A",
  "/q?names=A+B",
  "/q?names=A%2BB,C%20D",
  "/q?names=%zz",
  "/q?names=ab,TOOLONG,&days=0",
  "/q?names=A,B,C,D",
  "/q",
  "/q?days=x",
  "/q?names=&days=1.5",
  "/q?tags=AB&names=A",
  "/q?tags=AB&tags=x&names=A",
  "/q?names=A&extra=1&&=&x",
  "/q?names=A;days=2"
]

describe("a GET's query decoded at the edge", () => {
  let handler: (request: Request) => Promise<Response>
  let dispose: () => Promise<void>
  beforeAll(() => {
    const app = HttpApiBuilder.layer(TestApi).pipe(
      Layer.provide(Handlers),
      Layer.provide(QueryProblemsLive),
      Layer.provide(HttpServer.layerServices)
    )
    const web = HttpRouter.toWebHandler(app, { disableLogger: true, routerConfig })
    handler = (request) => web.handler(request)
    dispose = web.dispose
  })
  afterAll(() => dispose())

  const decodeQuery = routeTableOf(TestApi).match("/q")!.operations.GET!.decodeQuery!

  for (const target of targets) {
    it(`${target}: decoded or refused as HttpApiBuilder does`, async () => {
      const res = await handler(new Request(`http://x${target}`))
      const body = await res.text()
      const decoded = decodeQuery(target)
      if (Exit.isSuccess(decoded)) {
        expect(res.status).toBe(200)
        expect(JSON.parse(body)).toEqual(decoded.value)
      } else {
        expect(res.status).toBe(400)
        const issue = Exit.findErrorOption(decoded)
        expect(issue._tag).toBe("Some")
        if (issue._tag === "Some") expect(JSON.parse(body)).toEqual(validationFailure(issue.value))
      }
    })
  }

  it("lists every failed parameter, as the HttpApi's query parse options say", () => {
    const issue = Exit.findErrorOption(decodeQuery("/q?names=ab&days=0&tags=x"))
    expect(issue._tag).toBe("Some")
    if (issue._tag === "Some") {
      expect(validationFailure(issue.value).errors.map((e) => e.pointer)).toEqual(["/names/0", "/tags/0", "/days"])
    }
  })

  it("is undefined for an operation without a query", () => {
    class NoQuery extends HttpApi.make("no-query").add(HttpApiGroup.make("g").add(HttpApiEndpoint.get("get", "/x", { success: Schema.String }))) {}
    expect(routeTableOf(NoQuery).match("/x")!.operations.GET!.decodeQuery).toBeUndefined()
  })
})

describe("makeQueryDecoder", () => {
  const Query = Schema.Struct({ n: Schema.String.check(Schema.isMinLength(2)) })
  const counted = () => {
    let calls = 0
    const decode = SchemaParser.decodeUnknownExit(Query)
    const decoder = makeQueryDecoder(
      (target) => Object.fromEntries(new URL(target, "http://x").searchParams),
      (params) => {
        calls++
        return decode(params)
      },
      { decoded: { maxEntries: 2, maxBytes: 1024 }, refused: { maxEntries: 2, maxBytes: 1024 } }
    )
    return { decoder, calls: () => calls }
  }

  it("decodes a target once; the same target again comes from memory, frozen", () => {
    const { decoder, calls } = counted()
    const first = decoder("/p?n=AB")
    const again = decoder("/p?n=AB")
    expect(Exit.isSuccess(again) && again.value).toEqual({ n: "AB" })
    expect(Exit.isSuccess(first) && Object.isFrozen(first.value)).toBe(true)
    expect(calls()).toBe(1)
  })

  it("keeps refusals apart: distinct junk never evicts a query that decodes", () => {
    const { decoder, calls } = counted()
    decoder("/p?n=AB")
    for (let i = 0; i < 10; i++) expect(Exit.isFailure(decoder(`/p?n=${i}`))).toBe(true)
    const before = calls()
    expect(Exit.isSuccess(decoder("/p?n=AB"))).toBe(true)
    expect(calls()).toBe(before)
  })
})
