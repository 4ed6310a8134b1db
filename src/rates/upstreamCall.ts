/**
 * How a rates adapter calls its source over HTTP, the parts every source shares: one exchange read and
 * timed out, its status and body read into a value or a `SourceError` of the right kind, a cool-down
 * after a 429, and a logical call guarded by retries (transient failures only, jittered), an overall
 * time budget and a circuit breaker. Each client (coingecko/, coinbase/) adds its own budgets, limits
 * and error shapes around these.
 */
import { Cause, Clock, Duration, Effect, Exit, Layer, Option, Schedule, type Schema } from "effect"
import { type Headers, type HttpClient, type HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter, type Redis } from "effect/persistence"
import { recordUpstreamCall } from "../observability/metrics.ts"
import { breakerOutcome, failWithFor, type SourceError, type SourceName } from "./upstream.ts"

/** One answer as received. */
export interface RawResponse {
  readonly status: number
  readonly headers: Headers.Headers
  readonly body: string
  /** When it was read (epoch ms, by Effect's Clock). */
  readonly receivedAt: number
}

export type Decoder<A> = (json: unknown) => Exit.Exit<A, Schema.SchemaError>

const decodeJsonText = (text: string): Option.Option<unknown> => {
  try {
    return Option.some(JSON.parse(text))
  } catch {
    return Option.none()
  }
}

export const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

const bodyKind = (body: string) => (/^\s*</.test(body) ? "an HTML page" : body.trim() === "" ? "an empty body" : "a non-JSON body")

/** What a source's error bodies say, read by its own shapes; undefined when the body is not JSON. */
type ErrorMessage = (json: unknown) => string

export interface Reading {
  readonly source: SourceName
  /** The source's own words about an error, from its JSON error body. */
  readonly errorMessage: ErrorMessage
  /** Seconds to wait after a 429 (from its Retry-After, or the source's documented window). */
  readonly rateLimitedSeconds: (raw: RawResponse) => number
  /** A source that takes our key: a 401/403 means the key was refused. */
  readonly keyed: boolean
}

/** Status and body → value or typed failure (never a defect). */
export const interpretResponse = <A>(reading: Reading, what: string, raw: RawResponse, decode: Decoder<A>): Effect.Effect<A, SourceError> => {
  const fail = failWithFor(reading.source)
  const { body, status } = raw
  const json = decodeJsonText(body)
  if (status >= 200 && status < 300) {
    if (Option.isNone(json)) return fail("invalid-response", `${what}: ${status} with ${bodyKind(body)} that is not complete JSON (${body.length} chars)`)
    const decoded = decode(json.value)
    if (Exit.isFailure(decoded)) {
      const issue = Option.match(Cause.findErrorOption(decoded.cause), { onNone: () => "undecodable", onSome: (e) => e.message })
      return fail("invalid-response", `${what}: unexpected body shape: ${clip(issue)}`)
    }
    return Effect.succeed(decoded.value)
  }
  const message = Option.map(json, reading.errorMessage)
  const said = clip(Option.getOrElse(message, () => bodyKind(body)))
  if (status === 429) return fail("rate-limited", `${what}: 429 (${said})`, reading.rateLimitedSeconds(raw))
  // Only the source's own JSON 404 means "no such coin"; an HTML 404 is a misconfigured host.
  if (status === 404 && Option.isSome(message)) return fail("not-found", `${what}: 404 (${said})`)
  if (reading.keyed && (status === 401 || status === 403)) return fail("rejected", `${what}: ${status}, our API key was refused (${said})`)
  if (status === 408 || status >= 500) return fail("transient", `${what}: ${status} (${said})`)
  return fail("rejected", `${what}: unexpected ${status} (${said})`)
}

/** One HTTP exchange, read, within `timeoutMs`; a transport failure or a timeout is transient. */
export const sendOnce = (http: HttpClient.HttpClient, source: SourceName, what: string, request: HttpClientRequest.HttpClientRequest, timeoutMs: number) =>
  Effect.gen(function*() {
    const response = yield* http.execute(request)
    const body = yield* response.text
    recordUpstreamCall(source, String(response.status))
    return { status: response.status, headers: response.headers, body, receivedAt: yield* Clock.currentTimeMillis } satisfies RawResponse
  }).pipe(
    Effect.tapError(() => Effect.sync(() => recordUpstreamCall(source, "failed"))),
    Effect.catchTag("HttpClientError", (error) =>
      failWithFor(source)("transient", `${what}: ${error.reason._tag}${"description" in error.reason && error.reason.description ? `: ${error.reason.description}` : ""}`)),
    Effect.timeoutOrElse({ duration: Duration.millis(timeoutMs), orElse: () => failWithFor(source)("transient", `${what}: no answer within ${timeoutMs} ms`) })
  )

/** After a 429 nobody calls the source until its wait has passed: hammering it only extends the ban. */
export const makeCoolDown = (source: SourceName, detail: string) => {
  let until = 0
  return {
    check: Effect.flatMap(Clock.currentTimeMillis, (now) =>
      now < until ? failWithFor(source)("rate-limited", detail, Math.ceil((until - now) / 1000)) : Effect.void),
    /** Starts (or extends) the cool-down when `error` is a rate limit. */
    note: (error: SourceError) =>
      error.kind === "rate-limited" && error.retryAfterSeconds > 0
        ? Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => void (until = Math.max(until, now + error.retryAfterSeconds * 1000))))
        : Effect.void
  }
}

export interface Guard {
  readonly retries: number
  readonly retryBaseDelayMs: number
  readonly requestBudgetMs: number
  readonly attemptTimeoutMs: number
}

const PROBE_POLL_MS = 25

/**
 * One logical call: `attempt` retried on transient failures (jittered: instances that failed together
 * do not retry in lockstep), within the overall budget, through the breaker (which sees one outcome per
 * logical call, as `classify` weighs it). While another call probes a recovering source, wait for its
 * verdict rather than refuse.
 */
export const guardedCall = <A>(
  source: SourceName,
  breaker: CircuitBreaker.CircuitBreaker,
  guard: Guard,
  what: string,
  attempt: Effect.Effect<A, SourceError>,
  classify: (outcome: CircuitBreaker.Outcome) => CircuitBreaker.Outcome = (outcome) => outcome
): Effect.Effect<A, SourceError> => {
  const fail = failWithFor(source)
  return attempt.pipe(
    Effect.retry({
      schedule: Schedule.exponential(Duration.millis(guard.retryBaseDelayMs)).pipe(Schedule.jittered),
      times: guard.retries,
      while: (error) => error.kind === "transient"
    }),
    Effect.timeoutOrElse({
      duration: Duration.millis(guard.requestBudgetMs),
      orElse: () => fail("transient", `${what}: gave up after ${guard.requestBudgetMs} ms`)
    }),
    (logical) => breaker.execute(logical, { key: source, classify: (exit) => classify(breakerOutcome(exit)) }),
    Effect.retry({
      schedule: Schedule.spaced(Duration.millis(PROBE_POLL_MS)),
      times: Math.ceil(guard.attemptTimeoutMs / PROBE_POLL_MS),
      while: (error) => error._tag === "CircuitBreakerError" && error.reason._tag === "CircuitHalfOpen"
    }),
    Effect.catchTag("CircuitBreakerError", (error) =>
      error.reason._tag === "CircuitOpen"
        ? fail("circuit-open", "too many failures; not calling it for now", Math.ceil(Duration.toSeconds(error.reason.retryAfter)))
        : fail("circuit-open", "being probed after an outage", Math.ceil(guard.attemptTimeoutMs / 1000)))
  )
}

/** Budgets and breakers in this process only (one instance). */
export const layerGuardStoresMemory: Layer.Layer<RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore> = Layer.mergeAll(
  RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreMemory)),
  CircuitBreaker.layerStoreMemory()
)

/** Budgets and breakers shared by every instance through Redis (REDIS_URL); `keyPrefix` namespaces them. */
export const layerGuardStoresRedis = (keyPrefix = ""): Layer.Layer<RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore, never, Redis.Redis> =>
  Layer.mergeAll(
    RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreRedis({ prefix: `${keyPrefix}ratelimiter:` }))),
    CircuitBreaker.layerStoreRedis({ prefix: `${keyPrefix}circuitbreaker:` })
  )
