/**
 * The application served over real HTTP with in-memory fakes behind it (Layers swapped, nothing
 * patched): the rates fake, the newsletter fake, an in-memory OAuth registry with known clients.
 */
import { Layer } from "effect"
import { AppConfig } from "../../src/config/AppConfig.ts"
import type { Env } from "./config.ts"
import { AccessLog, type AccessLogEntry } from "../../src/observability/AccessLog.ts"
import type { HttpLimits } from "../../src/http/EdgeServer.ts"
import { RequestCounter } from "../../src/http/rateLimit.ts"
import { NewsletterMemory } from "../../src/newsletter/memory.ts"
import type { Newsletter } from "../../src/newsletter/Newsletter.ts"
import type { JtiStore } from "../../src/oauth/assertion/JtiStore.ts"
import type { CreateClientInput, CreateKeyClientInput } from "../../src/oauth/ClientRegistry.ts"
import { OAuth } from "../../src/oauth/OAuth.ts"
import { RatesProvider } from "../../src/rates/RatesProvider.ts"
import { configFrom } from "./config.ts"
import { serve, type TestServer } from "./server.ts"

export const testClients: ReadonlyArray<CreateClientInput> = [
  { name: "all scopes", clientId: "svc-all", secret: "secret-all", scopes: ["health:read", "rates:read", "subscriptions:write"] },
  { name: "health only", clientId: "svc-health", secret: "secret-health", scopes: ["health:read"] }
]

export interface TestApp extends TestServer {
  readonly logs: Array<AccessLogEntry>
}

export const startTestApp = async (options: {
  readonly env?: Env
  readonly rates?: Layer.Layer<RatesProvider, unknown>
  readonly newsletter?: Layer.Layer<Newsletter, unknown>
  /** Failed token requests allowed per minute and key (default 10, as in production). */
  readonly oauthMaxFailuresPerMinute?: number
  /** Where rate limits are counted (default: memory). */
  readonly counter?: Layer.Layer<RequestCounter, unknown, AppConfig>
  /** Request deadlines of the server (default: C8's). */
  readonly limits?: Partial<HttpLimits>
  /** More clients (private_key_jwt ones among them) beside `testClients`. */
  readonly oauthClients?: ReadonlyArray<CreateClientInput | CreateKeyClientInput>
  /** Where used client assertions are remembered (default: memory). */
  readonly jtiStore?: Layer.Layer<JtiStore, unknown, AppConfig>
} = {}): Promise<TestApp> => {
  const logs: Array<AccessLogEntry> = []
  // Limits out of the way unless a test sets them (rate-limit.test.ts does).
  const config = AppConfig.layer.pipe(Layer.provide(configFrom({
    PUBLIC_BASE_URL: "https://api.example.test",
    RATE_LIMIT_RATES_PER_MIN: "100000",
    RATE_LIMIT_SUBSCRIBE_PER_MIN: "100000",
    ...options.env
  })))
  const services = Layer.mergeAll(
    options.rates ?? RatesProvider.layerTest,
    options.newsletter ?? NewsletterMemory.layer,
    OAuth.layerTest({
      clients: [...testClients, ...(options.oauthClients ?? [])],
      ...(options.oauthMaxFailuresPerMinute === undefined ? {} : { maxFailuresPerMinute: options.oauthMaxFailuresPerMinute }),
      ...(options.jtiStore === undefined ? {} : { jtiStore: options.jtiStore })
    }),
    AccessLog.capture(logs),
    options.counter ?? RequestCounter.layerMemory
  ).pipe(Layer.provideMerge(config))
  const server = await serve(services, options.limits)
  return { ...server, logs }
}

/** Basic credentials as RFC 6749 §2.3.1 wants them: each half form-urlencoded, then base64. */
export const basic = (id: string, secret: string) =>
  "Basic " + Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")

export const tokenFor = async (app: TestServer, id: string, secret: string, scope?: string) => {
  const res = await fetch(`${app.url}/oauth/token`, {
    method: "POST",
    headers: { authorization: basic(id, secret), "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", ...(scope ? { scope } : {}) })
  })
  if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${await res.text()}`)
  return ((await res.json()) as { access_token: string }).access_token
}
