/**
 * Every path the service answers and what the edge must know of it, derived from the HttpApi
 * definition (methods, operation, rate-limit policy, CORS) plus the document pages. Built once.
 */
import { Context, Schema, SchemaAST, SchemaParser } from "effect"
import * as FindMyWay from "effect/http/FindMyWay"
import { HttpApi, type HttpApiEndpoint, type HttpApiGroup } from "effect/http-api"
import { Api, type OperationId, PublicOperation, RateLimitPolicy, type RateLimitPolicyName, RequiredScope } from "../api/Api.ts"
import type { Scope } from "../api/schemas.ts"
import { OAuthErrorBody } from "../api/schemas.ts"
import { type RequestMetrics, requestMetrics } from "../observability/metrics.ts"
import { type BodyDecoding, makeBodyDecoder } from "./bodyDecoder.ts"
import { documentRoutes } from "./documentRoutes.ts"
import { makeQueryDecoder, type QueryDecoding, type SearchParams } from "./queryDecoder.ts"

/**
 * Paths are matched exactly: no trailing-slash or case folding, so every resource has one URL and
 * the 405 table agrees with the router. Pass it to `HttpRouter.serve({ routerConfig })`.
 */
export const routerConfig: Partial<FindMyWay.RouterConfig> = {
  ignoreTrailingSlash: false,
  ignoreDuplicateSlashes: false,
  caseSensitive: true
}

/** One operation of the contract, as the edge sees it. */
export interface RouteOperation {
  readonly operationId: OperationId
  /** Counted against this policy (C8); undefined: not limited (health, documents, OAuth). */
  readonly policy: RateLimitPolicyName | undefined
  /** The scope a Bearer token needs (C6), if any. */
  readonly scope: Scope | undefined
  /**
   * Decodes a JSON body as the HttpApi does (the same schema and parse options; bodyDecoder.ts);
   * undefined when the operation takes no JSON body.
   */
  readonly decodeBody: ((body: Uint8Array) => BodyDecoding) | undefined
  /**
   * Decodes the query of a request target (`req.url`, origin-form) as the HttpApi does: the router's
   * parse of the query string, then the endpoint's `query` schema with the query parse options
   * (queryDecoder.ts); undefined when the operation declares no query. A failure's issue renders as
   * the HttpApi's 400 (validation.ts `validationFailure`) where the operation carries BodyProblems,
   * as every limited operation does (src/api/Api.ts).
   */
  readonly decodeQuery: ((target: string) => QueryDecoding) | undefined
}

export interface RouteMatch {
  /** The route pattern, e.g. `/problems/:code`: a bounded label for metrics. */
  readonly pattern: string
  readonly methods: ReadonlyArray<string>
  /** `methods` as the Allow header lists them. */
  readonly allow: string
  /** Browsers may call it (CORS): the public operations of the contract only. */
  readonly public: boolean
  /** How its errors are written: RFC 9457 problems, or OAuth JSON where the contract declares it (C6). */
  readonly errorForm: "problem" | "oauth"
  /** The contract's operation per method (HEAD shares GET's). */
  readonly operations: Readonly<Record<string, RouteOperation>>
  /** Its request metrics, labelled with `pattern`. */
  readonly metrics: RequestMetrics
}

export interface RouteTable {
  /** The route for the path, or undefined for an unknown path. */
  readonly match: (path: string) => RouteMatch | undefined
  readonly routes: ReadonlyArray<RouteMatch>
}

const methodOrder = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

const oauthError = SchemaAST.resolveIdentifier(OAuthErrorBody.ast)
/** An operation whose declared errors include the OAuth error body (the token endpoint's, C6). */
const declaresOAuthErrors = (errors: ReadonlyMap<number, ReadonlyArray<{ readonly ast: SchemaAST.AST }>>) =>
  [...errors.values()].some((schemas) => schemas.some((schema) => SchemaAST.resolveIdentifier(schema.ast) === oauthError))

/**
 * As HttpApiBuilder decodes an `application/json` payload: the union of the declared schemas, with the
 * payload parse options the annotations give (HttpApi.getSlotParseOptions, internal there).
 */
const jsonBodyDecoder = (endpoint: HttpApiEndpoint.Top, annotations: Context.Context<never>) => {
  const json = endpoint.payload.get("application/json")
  if (json === undefined || json.encoding._tag !== "Json") return undefined
  const options = Context.getOrUndefined(annotations, HttpApi.PayloadParseOptions) ??
    Context.getOrUndefined(annotations, HttpApi.ParseOptions)
  // The contract's payloads need no decoding services.
  const schema = Schema.Union(json.schemas as ReadonlyArray<Schema.Top>) as unknown as Schema.ConstraintDecoder<unknown>
  return makeBodyDecoder(SchemaParser.decodeUnknownExit(schema, options))
}

/** As HttpApiBuilder decodes `request.query`: the query schema read as arrays-or-single values, with the query parse options. */
const queryDecoder = (endpoint: HttpApiEndpoint.Top, annotations: Context.Context<never>, searchParamsOf: (target: string) => SearchParams) => {
  if (endpoint.query === undefined) return undefined
  const options = Context.getOrUndefined(annotations, HttpApi.QueryParseOptions) ??
    Context.getOrUndefined(annotations, HttpApi.ParseOptions)
  // The contract's queries need no decoding services.
  const schema = Schema.toCodecArrayFromSingle(endpoint.query) as unknown as Schema.ConstraintDecoder<unknown>
  return makeQueryDecoder(searchParamsOf, SchemaParser.decodeUnknownExit(schema, options))
}

/** The table of the contract's Api. */
export const makeRouteTable = (): RouteTable => routeTableOf(Api)

/** The table of an HttpApi: the contract's (makeRouteTable), or another in tests of the derivation itself. */
export const routeTableOf = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>): RouteTable => {
  const router = FindMyWay.make<RouteMatch>(routerConfig)
  // The HttpApi's router is a FindMyWay with this configuration: it parses a query string the same way.
  const searchParamsOf = (target: string): SearchParams => router.find("GET", target)?.searchParams ?? {}
  const byPath = new Map<string, { methods: Set<string>; public: boolean; oauth: boolean; operations: Record<string, RouteOperation> }>()
  const entry = (path: string) => {
    let found = byPath.get(path)
    if (found === undefined) byPath.set(path, found = { methods: new Set(), public: false, oauth: false, operations: {} })
    return found
  }
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, errors, mergedAnnotations }) => {
      const route = entry(endpoint.path)
      const operation: RouteOperation = {
        operationId: endpoint.identifier as OperationId,
        policy: Context.getOrUndefined(endpoint.annotations, RateLimitPolicy),
        scope: Context.getOrUndefined(endpoint.annotations, RequiredScope),
        decodeBody: jsonBodyDecoder(endpoint, mergedAnnotations),
        decodeQuery: queryDecoder(endpoint, mergedAnnotations, searchParamsOf)
      }
      route.public ||= Context.getOrUndefined(endpoint.annotations, PublicOperation) === true
      route.oauth ||= declaresOAuthErrors(errors)
      route.methods.add(endpoint.method)
      route.operations[endpoint.method] = operation
      // HEAD is answered wherever GET is (RFC 9110 §9.1).
      if (endpoint.method === "GET") {
        route.methods.add("HEAD")
        route.operations.HEAD = operation
      }
    }
  })
  for (const { path, methods } of documentRoutes) for (const method of methods) entry(path).methods.add(method)
  const routes: Array<RouteMatch> = []
  for (const [path, route] of byPath) {
    const methods = [...route.methods].sort((a, b) => methodOrder.indexOf(a) - methodOrder.indexOf(b))
    const match: RouteMatch = {
      pattern: path,
      methods,
      allow: methods.join(", "),
      public: route.public,
      errorForm: route.oauth ? "oauth" : "problem",
      operations: route.operations,
      metrics: requestMetrics(path)
    }
    routes.push(match)
    router.all(path as FindMyWay.PathInput, match)
  }
  return { match: (path) => router.find("GET", path)?.handler, routes }
}
