/**
 * One HTTP exchange with a newsletter provider, bounded in time, with a bounded retry of transient
 * failures. Both providers' subscribe calls are idempotent (Brevo DOI 201/204, Listmonk's public
 * subscription updates an existing subscriber), so repeating one after a timeout or reset cannot
 * subscribe anybody twice; the read-only calls (Listmonk's lists, Brevo's account) are safe alike.
 */
import { Data, Duration, Effect, Schedule } from "effect"
import { Headers, type HttpClient, type HttpClientRequest } from "effect/http"
import { recordUpstreamCall } from "../observability/metrics.ts"
import { maskEmail } from "./email.ts"
import { type NewsletterInvalidEmail, NewsletterUpstreamError, type SubscribeInput, type SubscribeOutcome } from "./Newsletter.ts"
import type { CallPolicy } from "./NewsletterConfig.ts"

/** A failure another attempt may cure: timeout, connection refused or reset, 5xx. Internal only. */
export class TransientFailure extends Data.TaggedError("TransientFailure")<{ readonly reason: string }> {}

/** What came back, read in full while the attempt's clock was running. */
export interface ProviderAnswer {
  readonly status: number
  readonly contentType: string
  readonly body: string
}

/** Header names whose values are secrets; kept out of tracing spans as well as logs. */
const secretHeaders = ["api-key"]

/**
 * Sends `request` and reads the whole body within `timeoutMs`. A connection that fails or a body that
 * breaks off is transient; a request that cannot be built (bad URL, unencodable body) is not.
 */
const exchange = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  timeoutMs: number
): Effect.Effect<ProviderAnswer, TransientFailure | NewsletterUpstreamError> =>
  client.execute(request).pipe(
    Effect.catchTag("HttpClientError", (error) =>
      Effect.fail(
        error.reason._tag === "TransportError"
          ? new TransientFailure({ reason: `connection failed: ${describeCause(error.reason.cause)}` })
          : new NewsletterUpstreamError({ reason: `request could not be sent (${error.reason._tag})` })
      )),
    Effect.flatMap((response) =>
      response.text.pipe(
        Effect.map((body): ProviderAnswer => {
          recordUpstreamCall("newsletter", String(response.status))
          return { status: response.status, contentType: response.headers["content-type"] ?? "", body }
        }),
        Effect.catchTag("HttpClientError", () =>
          Effect.fail(new TransientFailure({ reason: `answer ${response.status} broke off while reading the body` })))
      )
    ),
    Effect.timeoutOrElse({
      duration: Duration.millis(timeoutMs),
      orElse: () => Effect.fail(new TransientFailure({ reason: `no complete answer within ${timeoutMs} ms` }))
    }),
    Effect.tapError(() => Effect.sync(() => recordUpstreamCall("newsletter", "failed"))),
    Effect.updateService(Headers.CurrentRedactedNames, (names) => [...names, ...secretHeaders])
  )

/**
 * Runs `attempt`, repeating it after a transient failure (jittered exponential back-off from 200 ms)
 * at most `policy.retries` times, and gives up at `policy.deadlineMs` whatever is in flight. Whatever
 * transient failure remains becomes a `NewsletterUpstreamError`.
 */
const withCallPolicy = <A, E>(
  attempt: Effect.Effect<A, E | TransientFailure>,
  policy: CallPolicy,
  onRetry: (reason: string) => Effect.Effect<void>
): Effect.Effect<A, E | NewsletterUpstreamError> =>
  attempt.pipe(
    Effect.tapError((error) => isTransient(error) ? onRetry(error.reason) : Effect.void),
    Effect.retry({
      while: isTransient,
      times: policy.retries,
      schedule: Schedule.exponential(Duration.millis(200)).pipe(Schedule.jittered)
    }),
    Effect.timeoutOrElse({
      duration: Duration.millis(policy.deadlineMs),
      orElse: () =>
        Effect.fail(new TransientFailure({ reason: `no answer within the ${policy.deadlineMs} ms deadline` }))
    }),
    Effect.mapError((error) => isTransient(error) ? new NewsletterUpstreamError({ reason: error.reason }) : error)
  )

/**
 * One call to `provider`: `request` sent and its answer `interpret`ed under the call policy; a
 * transient failure left at the end is a `NewsletterUpstreamError` saying what happened.
 */
export const callProvider = <A, E>(
  provider: string,
  policy: CallPolicy,
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  interpret: (answer: ProviderAnswer) => Effect.Effect<A, E | TransientFailure>
): Effect.Effect<A, E | NewsletterUpstreamError> =>
  withCallPolicy(
    exchange(client, request, policy.attemptTimeoutMs).pipe(Effect.flatMap(interpret)),
    policy,
    (reason) => Effect.logDebug(`${provider} attempt failed; may retry`, reason)
  )

const isTransient = (error: unknown): error is TransientFailure =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "TransientFailure"

/** A short, secret-free description of a network failure (its code, e.g. ECONNRESET). */
const describeCause = (cause: unknown): string => {
  let current: unknown = cause
  for (let depth = 0; depth < 4 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === "string") return code
    current = (current as { cause?: unknown }).cause
  }
  return cause instanceof Error ? cause.name : "unknown"
}

/** Parses a JSON body, or `undefined` when it is not JSON. */
export const parseJson = (body: string): unknown => {
  try {
    return JSON.parse(body)
  } catch {
    return undefined
  }
}

/**
 * One subscription at a provider: `interpret`ed exchanges under the call policy, logged (address
 * masked) and traced the same way for every provider.
 */
export const providerSubscribe = (
  provider: string,
  input: SubscribeInput,
  policy: CallPolicy,
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  interpret: (answer: ProviderAnswer) => Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError | TransientFailure>
): Effect.Effect<SubscribeOutcome, NewsletterInvalidEmail | NewsletterUpstreamError> =>
  callProvider(provider, policy, client, request, interpret).pipe(
    Effect.tapError((error) =>
      error._tag === "NewsletterInvalidEmail"
        ? Effect.logInfo(`${provider} refused the address`, error.reason)
        : Effect.logWarning(`${provider} subscribe failed`, error.reason)
    ),
    Effect.annotateLogs({ provider, email: maskEmail(input.email), locale: input.locale }),
    Effect.withSpan(`Newsletter.${provider}.subscribe`, { attributes: { locale: input.locale } })
  )
