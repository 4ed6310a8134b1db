/**
 * How a rates adapter calls its source over HTTP, the parts every source shares: one timed exchange read
 * into a value or a typed `SourceError`, a cool-down after a 429, and a logical call guarded by jittered
 * retries (transient only), a time budget and a circuit breaker. coingecko/ and coinbase/ add the rest.
 */
import { Cause, Clock, Duration, Effect, Exit, Layer, Option, Schedule, type Schema, Semaphore } from "effect"
import { type Headers, type HttpClient, type HttpClientRequest } from "effect/http"
import { CircuitBreaker, RateLimiter } from "effect/persistence"
import { recordUpstreamCall } from "../observability/metrics.ts"
import { type Charge, failWithFor, type SourceError, type SourceFailureTag, type SourceName } from "./upstream.ts"

/** A failure of `source`, as every step here reports it. */
const fail = (source: SourceName, reason: SourceFailureTag, detail: string, retryAfterSeconds = 0) =>
  failWithFor(source)(reason, detail, retryAfterSeconds)

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

type ErrorMessage = (json: unknown) => string

export interface Reading {
  readonly source: SourceName
  /** The source's own words about an error, from its JSON error body. */
  readonly errorMessage: ErrorMessage
  /** Seconds to wait after a 429 (from its Retry-After, or the source's documented window). */
  readonly rateLimitedSeconds: (raw: RawResponse) => number
  /** A source that takes our key: a 401/403 means the key was refused. */
  readonly keyed: boolean
  /** A refusal the source explains itself (CoinGecko's 401, error 10012: the plan's history), read before the status. */
  readonly ownRefusal?: ((status: number, json: unknown) => { readonly reason: SourceFailureTag; readonly detail: string } | undefined) | undefined
}

/** Status and body → value or typed failure (never a defect). */
export const interpretResponse = <A>(reading: Reading, what: string, raw: RawResponse, decode: Decoder<A>): Effect.Effect<A, SourceError> => {
  const { source } = reading
  const { body, status } = raw
  const json = decodeJsonText(body)
  if (status >= 200 && status < 300) {
    if (Option.isNone(json)) return fail(source, "InvalidResponse", `${what}: ${status} with ${bodyKind(body)} that is not complete JSON (${body.length} chars)`)
    const decoded = decode(json.value)
    if (Exit.isFailure(decoded)) {
      const issue = Option.match(Cause.findErrorOption(decoded.cause), { onNone: () => "undecodable", onSome: (e) => e.message })
      return fail(source, "InvalidResponse", `${what}: unexpected body shape: ${clip(issue)}`)
    }
    return Effect.succeed(decoded.value)
  }
  const message = Option.map(json, reading.errorMessage)
  const said = clip(Option.getOrElse(message, () => bodyKind(body)))
  if (status === 429) return fail(source, "RateLimited", `${what}: 429 (${said})`, reading.rateLimitedSeconds(raw))
  // Only the source's own JSON 404 means "no such coin"; an HTML 404 is a misconfigured host.
  if (status === 404 && Option.isSome(message)) return fail(source, "NotFound", `${what}: 404 (${said})`)
  const own = Option.isSome(json) ? reading.ownRefusal?.(status, json.value) : undefined
  if (own !== undefined) return fail(source, own.reason, `${what}: ${status}, ${own.detail} (${said})`)
  // A URL past what the source (or its CDN) takes: ours to split, whatever key we hold.
  if (status === 414) return fail(source, "BadRequest", `${what}: 414, the URL we sent is longer than the source takes (${said})`)
  if (reading.keyed && (status === 401 || status === 403)) return fail(source, "Rejected", `${what}: ${status}, our API key was refused (${said})`)
  if (status === 408 || status >= 500) return fail(source, "Transient", `${what}: ${status} (${said})`)
  return fail(source, "Rejected", `${what}: unexpected ${status} (${said})`)
}

/** What became of one exchange (CoinGecko bills answers); sent, with no status and not `unanswered`: we stopped waiting. */
export interface Exchange {
  sent: boolean
  status: number | undefined
  unanswered: boolean
}

export const newExchange = (): Exchange => ({ sent: false, status: undefined, unanswered: false })

/** Whether a source that bills its answers billed an exchange: it answered 200, or may have (it went out and we stopped waiting). */
export const billed = (exchange: Exchange) => exchange.status === 200 || (exchange.sent && exchange.status === undefined && !exchange.unanswered)

/** One HTTP exchange, read, within `timeoutMs` (a transport failure or timeout is transient), told to `exchange`. */
const sendOnce = (
  http: HttpClient.HttpClient,
  source: SourceName,
  what: string,
  request: HttpClientRequest.HttpClientRequest,
  timeoutMs: number,
  exchange: Exchange = newExchange()
) =>
  Effect.gen(function*() {
    exchange.sent = true
    const response = yield* http.execute(request)
    exchange.status = response.status
    const body = yield* response.text
    recordUpstreamCall(source, String(response.status))
    return { status: response.status, headers: response.headers, body, receivedAt: yield* Clock.currentTimeMillis } satisfies RawResponse
  }).pipe(
    Effect.tapError(() => Effect.sync(() => recordUpstreamCall(source, "failed"))),
    Effect.catchTag("HttpClientError", (error) => {
      if (exchange.status === undefined) exchange.unanswered = true
      return fail(source, "Transient", `${what}: ${error.reason._tag}${"description" in error.reason && error.reason.description ? `: ${error.reason.description}` : ""}`)
    }),
    Effect.timeoutOrElse({ duration: Duration.millis(timeoutMs), orElse: () => fail(source, "Transient", `${what}: no answer within ${timeoutMs} ms`) })
  )

/** After a 429 nobody calls the source until its wait has passed: hammering it only extends the ban. */
const makeCoolDown = (source: SourceName, detail: string) => {
  let until = 0
  return {
    check: Effect.flatMap(Clock.currentTimeMillis, (now) =>
      now < until ? fail(source, "RateLimited", detail, Math.ceil((until - now) / 1000)) : Effect.void),
    /** Starts (or extends) the cool-down when `error` is a rate limit. */
    note: (error: SourceError) =>
      error.reason._tag === "RateLimited" && error.retryAfterSeconds > 0
        ? Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => void (until = Math.max(until, now + error.retryAfterSeconds * 1000))))
        : Effect.void
  }
}

/** A source's numbers for its calls, the same fields in each source's configuration (CoinGeckoConfig.ts, CoinbaseConfig.ts). */
export interface SourceGuardConfig {
  /** Time allowed for one HTTP attempt (headers and body). */
  readonly attemptTimeoutMs: number
  /** Wall-clock budget of one logical call, retries and waits for a rate token included; past it, a held copy or a failure. */
  readonly requestBudgetMs: number
  /** Extra attempts after a transient failure (5xx, timeout, connection reset). */
  readonly retries: number
  /** First backoff delay; doubles per retry, jittered. */
  readonly retryBaseDelayMs: number
  /** Calls in flight at once. */
  readonly maxConcurrency: number
  /** Consecutive failed calls that open the breaker. */
  readonly breakerFailures: number
  /** How long an open breaker refuses calls before letting one probe through. */
  readonly breakerOpenMs: number
}

const PROBE_POLL_MS = 25

/** A logical call's verdict for the circuit breaker: only a source that does not answer properly counts. */
const breakerOutcome = (exit: Exit.Exit<unknown, SourceError>): CircuitBreaker.Outcome => {
  if (Exit.isSuccess(exit)) return CircuitBreaker.success
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error)) return CircuitBreaker.failure()
  switch (error.value.reason._tag) {
    case "Transient":
    case "InvalidResponse":
      return CircuitBreaker.failure()
    case "NotFound":
      return CircuitBreaker.success // the source answered correctly
    default:
      // Rate limits have their own cool-down; a refused key or request is a fault to report, not an outage to hide.
      return CircuitBreaker.ignored
  }
}

/** A failure counts once per request (its `Charge` object) in a breaker: a request whose calls all fail is one failure, not one per coin. */
const countOncePerRequest = () => {
  const counted = new WeakSet<Charge>()
  return (outcome: CircuitBreaker.Outcome, charge: Charge | undefined): CircuitBreaker.Outcome => {
    if (outcome._tag !== "Failure" || charge === undefined || charge._tag === "Background") return outcome
    return counted.has(charge) ? CircuitBreaker.ignored : (counted.add(charge), outcome)
  }
}

/**
 * One logical call: `attempt` retried on transient failures (jittered, so instances do not retry in lockstep)
 * within the budget, through the breaker; while another call probes a recovering source, wait for its verdict.
 */
const guardedCall = <A>(
  source: SourceName,
  breaker: CircuitBreaker.CircuitBreaker,
  guard: SourceGuardConfig,
  what: string,
  attempt: Effect.Effect<A, SourceError>,
  classify: (exit: Exit.Exit<unknown, SourceError>) => CircuitBreaker.Outcome
): Effect.Effect<A, SourceError> =>
  attempt.pipe(
    Effect.retry({
      schedule: Schedule.exponential(Duration.millis(guard.retryBaseDelayMs)).pipe(Schedule.jittered),
      times: guard.retries,
      while: (error) => error.reason._tag === "Transient"
    }),
    Effect.timeoutOrElse({
      duration: Duration.millis(guard.requestBudgetMs),
      orElse: () => fail(source, "Transient", `${what}: gave up after ${guard.requestBudgetMs} ms`)
    }),
    (logical) => breaker.execute(logical, { key: source, classify }),
    Effect.retry({
      schedule: Schedule.spaced(Duration.millis(PROBE_POLL_MS)),
      times: Math.ceil(guard.attemptTimeoutMs / PROBE_POLL_MS),
      while: (error) => error._tag === "CircuitBreakerError" && error.reason._tag === "CircuitHalfOpen"
    }),
    Effect.catchTag("CircuitBreakerError", (error) =>
      error.reason._tag === "CircuitOpen"
        ? fail(source, "CircuitOpen", "too many failures; not calling it for now", Math.ceil(Duration.toSeconds(error.reason.retryAfter)))
        : fail(source, "CircuitOpen", "being probed after an outage", Math.ceil(guard.attemptTimeoutMs / 1000)))
  )

/** Budgets and breakers in this process only (one instance). */
export const layerGuardStoresMemory: Layer.Layer<RateLimiter.RateLimiter | CircuitBreaker.CircuitBreakerStore> = Layer.mergeAll(
  RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreMemory)),
  CircuitBreaker.layerStoreMemory()
)

/** What an attempt pays (CoinGecko's credits), taken before it is sent and given back when the source did not bill it. */
type Held = { readonly giveBack: (count: number) => Effect.Effect<void> }
export type AttemptCost = (charge: Charge, firstAttempt: boolean) => Effect.Effect<Held, SourceError>

/** A source's own numbers and rules for its calls: the source caller below is the same for every source. */
export interface SourceCallerOptions {
  readonly http: HttpClient.HttpClient
  readonly reading: Reading
  /** The source's numbers: retries and time budgets, concurrency, and when its breaker opens and for how long. */
  readonly config: SourceGuardConfig
  /** What a caller is told while a 429's cool-down lasts. */
  readonly coolDownDetail: string
  /** Waited for inside the permit, before each exchange (Coinbase's 10-a-second bucket): no burst past it. */
  readonly beforeSend?: Effect.Effect<void> | undefined
}

/** The one source caller (CoinGecko, Coinbase): attempts (cool-down, cost, permit, `beforeSend`, one exchange), guarded. */
export const makeSourceCaller = (options: SourceCallerOptions) =>
  Effect.gen(function*() {
    const { config, reading } = options
    const permits = yield* Semaphore.make(config.maxConcurrency)
    const breaker = yield* CircuitBreaker.make({
      tripPolicy: CircuitBreaker.consecutive(config.breakerFailures),
      openDuration: Duration.millis(config.breakerOpenMs)
    })
    const coolDown = makeCoolDown(reading.source, options.coolDownDetail)
    const countOnce = countOncePerRequest()
    const exchangeOnce = <A>(what: string, request: HttpClientRequest.HttpClientRequest, read: (raw: RawResponse) => Effect.Effect<A, SourceError>, timeoutMs: number, exchange: Exchange) =>
      permits.withPermit(Effect.andThen(
        options.beforeSend ?? Effect.void,
        sendOnce(options.http, reading.source, what, request, timeoutMs, exchange).pipe(Effect.flatMap(read), Effect.tapError(coolDown.note))
      ))
    /** One attempt, paid by `cost` when given. */
    const attempt = <A>(
      what: string,
      request: HttpClientRequest.HttpClientRequest,
      read: (raw: RawResponse) => Effect.Effect<A, SourceError>,
      timeoutMs: number,
      cost?: Effect.Effect<Held, SourceError>
    ): Effect.Effect<A, SourceError> =>
      Effect.andThen(coolDown.check, Effect.suspend(() => {
        const exchange = newExchange()
        return cost === undefined
          ? exchangeOnce(what, request, read, timeoutMs, exchange)
          : Effect.acquireUseRelease(cost, () => exchangeOnce(what, request, read, timeoutMs, exchange), (held) => (billed(exchange) ? Effect.void : held.giveBack(1)))
      }))
    /** One logical call: attempts of `request` guarded; `cost` pays each attempt for `charge`. */
    const call = <A>(what: string, request: HttpClientRequest.HttpClientRequest, read: (raw: RawResponse) => Effect.Effect<A, SourceError>, charge?: Charge, cost?: AttemptCost) =>
      Effect.suspend(() => {
        let attempts = 0
        const paid = cost === undefined || charge === undefined ? undefined : Effect.suspend(() => cost(charge, attempts++ === 0))
        return guardedCall(reading.source, breaker, config, what, attempt(what, request, read, config.attemptTimeoutMs, paid), (exit) => countOnce(breakerOutcome(exit), charge))
      })
    /** The body of an answer, read with `decode`. */
    const body = <A>(what: string, decode: Decoder<A>) => (raw: RawResponse) => interpretResponse(reading, what, raw, decode)
    return { attempt, call, body, coolDown, permits, exchangeOnce }
  })

