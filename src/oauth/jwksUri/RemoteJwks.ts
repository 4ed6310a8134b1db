/**
 * The public keys a `private_key_jwt` client publishes at its `jwks_uri` (CONTRACT C6), fetched with the
 * service's one HttpClient, so that an integrator rotates keys by publishing new ones, with no operator.
 *
 * - Where: addressPolicy.ts (https in production, public addresses unless allowed, the checked address
 *   is the one connected to). Redirects are not followed (the HttpClient does not): a 3xx is a failure.
 * - How much: 64 KiB at most (declared or read), 5 s for the whole exchange, a 200 with a JSON JWK Set.
 * - How long: per `Cache-Control: max-age`, within 5 minutes and 24 hours (none given: 5 minutes). A
 *   failure is remembered for 10 s, so a client's failing host is asked at most every 10 s.
 * - Rotation: an assertion naming a `kid` in no key fetches the set again, at most once a minute per
 *   client; the new set replaces the old one, so a key dropped from the document stops working then.
 *
 * Concurrent requests for the same client share one fetch (Effect's Cache).
 */
import { Cache, Clock, Context, Data, Duration, Effect, Layer, Semaphore, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { BlockList } from "node:net"
import type * as jose from "jose"
import { AppConfig } from "../../config/AppConfig.ts"
import { type ClientJwks, keySelector, readPublishedJwks } from "../clientKeys.ts"
import { OAuthConfig } from "../OAuthConfig.ts"
import { type AddressPolicy, checkedTarget } from "./addressPolicy.ts"

export const MAX_JWKS_BYTES = 64 * 1024
const FETCH_TIMEOUT = Duration.seconds(5)
const MIN_CACHE_MS = 5 * 60_000
const MAX_CACHE_MS = 24 * 3600_000
/** An unknown `kid` fetches the set again at most this often per client. */
const UNKNOWN_KID_REFETCH_MS = 60_000
const FAILURE_RETRY_MS = 10_000
const CAPACITY = 10_000

/** The client's keys could not be had; `reason` is for the log only. */
class JwksUnavailable extends Data.TaggedError("JwksUnavailable")<{ readonly reason: string }> {}

interface PublishedKeys {
  readonly jwks: ClientJwks
  /** jose's key selection over them. */
  readonly select: jose.JWTVerifyGetKey
  readonly fetchedAt: number
}

interface Fetched extends PublishedKeys {
  readonly lifetimeMs: number
}

export interface RemoteJwksShape {
  /** The keys held for this client and URI, fetched first when none are (or they expired). */
  readonly keys: (clientId: string, uri: string) => Effect.Effect<PublishedKeys, JwksUnavailable>
  /**
   * An assertion named a `kid` in none of `held`: the set fetched again, unless it was fetched less than a
   * minute ago (then the keys held now, which another request may have just refreshed).
   */
  readonly refetch: (clientId: string, uri: string, held: PublishedKeys) => Effect.Effect<PublishedKeys, JwksUnavailable>
}

/** `max-age` of a Cache-Control header, clamped to 5 min..24 h; none (or no-store, no-cache): 5 min. */
export const cacheLifetimeMs = (cacheControl: string | undefined): number => {
  const directives = (cacheControl ?? "").toLowerCase().split(",").map((d) => d.trim())
  if (directives.some((d) => d === "no-store" || d === "no-cache")) return MIN_CACHE_MS
  const maxAge = directives.map((d) => /^max-age\s*=\s*"?(\d+)"?$/.exec(d)?.[1]).find((v) => v !== undefined)
  const ms = maxAge === undefined ? 0 : Number(maxAge) * 1000
  return Math.min(MAX_CACHE_MS, Math.max(MIN_CACHE_MS, ms))
}

const unavailable = (reason: string) => new JwksUnavailable({ reason })

/** The body, failing as soon as it passes `limit` bytes. */
const readAtMost = <E>(body: Stream.Stream<Uint8Array, E>, limit: number) =>
  body.pipe(
    Stream.runFoldEffect(() => ({ chunks: [] as Array<Uint8Array>, size: 0 }), (acc, chunk) => {
      acc.size += chunk.length
      if (acc.size > limit) return Effect.fail(unavailable(`the document is larger than ${limit} bytes`))
      acc.chunks.push(chunk)
      return Effect.succeed(acc)
    }),
    Effect.map(({ chunks }) => Buffer.concat(chunks).toString("utf8"))
  )

const make = (policy: AddressPolicy) =>
  Effect.gen(function*() {
    const http = yield* HttpClient.HttpClient

    const fetchOnce = (uri: string): Effect.Effect<Fetched, JwksUnavailable> =>
      Effect.gen(function*() {
        const target = yield* Effect.mapError(checkedTarget(uri, policy), unavailable)
        let request = HttpClientRequest.get(target.url).pipe(HttpClientRequest.setHeader("accept", "application/jwk-set+json, application/json"))
        if (target.host !== undefined) request = HttpClientRequest.setHeader(request, "host", target.host)
        const response = yield* http.execute(request).pipe(Effect.mapError((e) => unavailable(`unreachable (${e.reason._tag})`)))
        if (response.status !== 200) return yield* unavailable(`answered ${response.status}`)
        const declared = Number(response.headers["content-length"])
        if (declared > MAX_JWKS_BYTES) return yield* unavailable(`the document is larger than ${MAX_JWKS_BYTES} bytes`)
        const text = yield* readAtMost(response.stream, MAX_JWKS_BYTES).pipe(
          Effect.catchTag("HttpClientError", (e) => Effect.fail(unavailable(`body not read (${e.reason._tag})`)))
        )
        let document: unknown
        try {
          document = JSON.parse(text)
        } catch {
          return yield* unavailable("the document is not JSON")
        }
        const published = yield* Effect.promise(() => readPublishedJwks(document))
        if (published === undefined) return yield* unavailable(`the document is not a JWK Set ({"keys": [...]})`)
        if (published.jwks.keys.length === 0) return yield* unavailable("the JWK Set holds no key this service can use")
        return {
          jwks: published.jwks,
          select: keySelector(published.jwks),
          fetchedAt: yield* Clock.currentTimeMillis,
          lifetimeMs: cacheLifetimeMs(response.headers["cache-control"])
        }
      }).pipe(
        Effect.timeoutOrElse({ duration: FETCH_TIMEOUT, orElse: () => Effect.fail(unavailable("no complete answer within 5 s")) })
      )

    const cache = yield* Cache.makeWith(
      (key: string) => {
        const [clientId, uri] = JSON.parse(key) as [string, string]
        return fetchOnce(uri).pipe(
          Effect.tapError((e) =>
            Effect.logWarning("oauth: a client's jwks_uri could not be used; its assertions are refused meanwhile").pipe(
              Effect.annotateLogs({ clientId, jwksUri: uri, reason: e.reason })
            )
          )
        )
      },
      { capacity: CAPACITY, timeToLive: (exit) => (exit._tag === "Success" ? exit.value.lifetimeMs : FAILURE_RETRY_MS) }
    )
    // One refetch at a time per client: concurrent assertions naming a new kid share it.
    const refetchLocks = new Map<string, Semaphore.Semaphore>()
    const lockOf = (key: string) => {
      let lock = refetchLocks.get(key)
      if (lock === undefined) {
        if (refetchLocks.size >= CAPACITY) refetchLocks.clear()
        lock = Semaphore.makeUnsafe(1)
        refetchLocks.set(key, lock)
      }
      return lock
    }

    const keyOf = (clientId: string, uri: string) => JSON.stringify([clientId, uri])

    return RemoteJwks.of({
      keys: (clientId, uri) => Cache.get(cache, keyOf(clientId, uri)),
      refetch: (clientId, uri, held) => {
        const key = keyOf(clientId, uri)
        return lockOf(key).withPermits(1)(Effect.gen(function*() {
          const current = yield* Cache.get(cache, key)
          if (current !== held) return current // refreshed meanwhile by another request
          const now = yield* Clock.currentTimeMillis
          if (now - current.fetchedAt < UNKNOWN_KID_REFETCH_MS) return current
          return yield* Cache.refresh(cache, key)
        }))
      }
    })
  })

/** `OAUTH_JWKS_URI_ALLOWED_NETWORKS` as a BlockList (`all`: every non-public network allowed). */
export const allowedNetworks = (cidrs: ReadonlyArray<string> | "all"): BlockList | "all" => {
  if (cidrs === "all") return "all"
  const list = new BlockList()
  for (const cidr of cidrs) {
    const [network = "", prefix = ""] = cidr.split("/")
    list.addSubnet(network, Number(prefix), network.includes(":") ? "ipv6" : "ipv4")
  }
  return list
}

export class RemoteJwks extends Context.Service<RemoteJwks, RemoteJwksShape>()("app/oauth/RemoteJwks") {
  /** APP_ENV and OAUTH_JWKS_URI_ALLOWED_NETWORKS decide where it may fetch. */
  static readonly layer: Layer.Layer<RemoteJwks, never, HttpClient.HttpClient | AppConfig | OAuthConfig> = Layer.effect(
    RemoteJwks,
    Effect.gen(function*() {
      const { isProduction } = yield* AppConfig
      const { jwksUriAllowedNetworks } = yield* OAuthConfig
      return yield* make({ production: isProduction, allowed: allowedNetworks(jwksUriAllowedNetworks) })
    })
  )

  /**
   * For tests: APP_ENV from AppConfig; `allowed` networks (default: every one outside production, none in
   * it) and a name resolver of the test's.
   */
  static readonly layerTest = (options: Omit<AddressPolicy, "production" | "allowed"> & { readonly allowed?: ReadonlyArray<string> | "all" } = {}) =>
    Layer.effect(
      RemoteJwks,
      Effect.gen(function*() {
        const { isProduction } = yield* AppConfig
        const allowed = allowedNetworks(options.allowed ?? (isProduction ? [] : "all"))
        return yield* make({ production: isProduction, allowed, resolve: options.resolve })
      })
    )
}
