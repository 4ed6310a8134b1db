/**
 * The soak's traffic (soak.ts): requests of each kind drawn by weight from a seeded PRNG (health, rates with varied
 * symbols, currencies and days, subscriptions with unique addresses, token requests, Bearer calls, bad requests),
 * each answer held to the fuzz suite's HTTP invariants (test/support/fuzz/invariants.ts) and tallied.
 */
import type { Agent } from "node:http"
import { emulatedCurrencies } from "../emulators/coingecko-data.ts"
import { type RawRequest, type RawResponse, send } from "../support/fuzz/http.ts"
import { violationsOf } from "../support/fuzz/invariants.ts"
import type { OpenApiModel } from "../support/fuzz/openapi.ts"

/** mulberry32: a small seeded PRNG so a run's traffic mix is reproducible. */
export const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

const LOCALES = ["es", "en", "fr", "it", "pt"] as const
/** The Brevo template of each locale's confirmation, as BREVO_DOI_TEMPLATES gives them (soakService.ts). */
export const TEMPLATES: Record<string, number> = { es: 11, en: 12, fr: 13, it: 14, pt: 15 }
const SYMBOLS = ["BTC", "eth", "SOL", "xrp", "DOGE", "ada", "DOT", "LINK", "ltc", "PEPE", "HOT", "GHOST", "NOPE", "ZZZ9"]

export interface Traffic {
  /** How long each answer took (ms), in the order they came. */
  readonly durations: ReadonlyArray<number>
  readonly byStatus: Readonly<Record<string, number>>
  readonly byKind: Readonly<Record<string, number>>
  /** Normalised address → locale, for the subscriptions answered 200. */
  readonly accepted: ReadonlyMap<string, string>
  /** Every address a subscription was sent for, normalised. */
  readonly sentAddresses: ReadonlySet<string>
  readonly failedSubscriptions: () => number
  /** Sends one request of a kind drawn by weight and judges its answer. */
  readonly nextRequest: () => Promise<unknown>
}

export const makeTraffic = ({ agent, client, model, pick, publicBaseUrl, random, seed, url, violate }: {
  /** The service's URL, and the base URL it was given (the invariants check the links it writes against it). */
  readonly url: string
  readonly publicBaseUrl: string
  readonly agent: Agent
  readonly model: OpenApiModel
  readonly client: { readonly client_id: string; readonly client_secret: string }
  readonly seed: number
  readonly random: () => number
  readonly pick: <A>(xs: ReadonlyArray<A>) => A
  readonly violate: (what: string) => void
}): Traffic => {
  const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString("base64")}`
  const durations: Array<number> = []
  const byStatus: Record<string, number> = {}
  const byKind: Record<string, number> = {}
  const accepted = new Map<string, string>() // normalised address → locale, for 200s
  const sentAddresses = new Set<string>()
  let failedSubscriptions = 0
  let accessToken: string | undefined
  let seq = 0

  const exchange = async (kind: string, req: RawRequest) => {
    let response: RawResponse
    try {
      response = await send(url, { ...req, agent, timeoutMs: 10_000 })
    } catch (error) {
      violate(`${kind}: ${req.method} ${req.path} got no answer (${String(error)})`)
      return undefined
    }
    durations.push(response.elapsedMs)
    byStatus[response.status] = (byStatus[response.status] ?? 0) + 1
    byKind[kind] = (byKind[kind] ?? 0) + 1
    const body = req.body === undefined ? "" : Buffer.isBuffer(req.body) ? req.body.toString("latin1").slice(0, 2_000) : req.body.slice(0, 2_000)
    const sent = `${req.method} ${req.path}\n${(req.headers ?? []).map(([n, v]) => `${n}: ${v}`).join("\n")}\n\n${body}`
    for (const v of violationsOf(model, publicBaseUrl, { method: req.method, target: req.path, sent, response })) {
      violate(`${kind} ${req.method} ${req.path} → ${response.status}: ${v}`)
    }
    return response
  }

  const jsonPost = (path: string, body: unknown, headers: Array<[string, string]> = []): RawRequest => ({
    method: "POST",
    path,
    headers: [["Content-Type", "application/json"], ...headers],
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

  const ratesBody = () => ({
    cryptos: Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(SYMBOLS)),
    currency: pick([...emulatedCurrencies.keys()]),
    days: random() < 0.7 ? pick([1, 7, 14, 30, 90]) : 1 + Math.floor(random() * 365)
  })

  /** One request of a kind drawn by weight. */
  const traffic: ReadonlyArray<readonly [weight: number, kind: string, run: () => Promise<unknown>]> = [
    [15, "health", () => exchange("health", { method: "GET", path: "/api/health", headers: [["Accept", "application/json"]] })],
    [25, "rates", () => exchange("rates", jsonPost("/api/v1/exchange-rates", ratesBody()))],
    [15, "subscribe", async () => {
      const locale = pick(LOCALES)
      const n = seq++
      // Mixed-case domains: what must reach the provider is the normalised (lower-case) domain.
      const domain = n % 3 === 0 ? "Example.COM" : "example.com"
      const email = `soak.${seed}.${n}@${domain}`
      const normalised = `soak.${seed}.${n}@example.com`
      sentAddresses.add(normalised)
      const res = await exchange("subscribe", jsonPost("/api/subscribe", { email, locale }))
      if (res?.status === 200) accepted.set(normalised, locale)
      else failedSubscriptions++
    }],
    [7, "token", async () => {
      const res = await exchange("token", {
        method: "POST",
        path: "/oauth/token",
        headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", basic]],
        body: "grant_type=client_credentials&scope=health%3Aread+rates%3Aread"
      })
      if (res?.status === 200) accessToken = (JSON.parse(res.text) as { access_token: string }).access_token
    }],
    [3, "token-bad", () =>
      exchange("token-bad", {
        method: "POST",
        path: "/oauth/token",
        headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", `Basic ${Buffer.from(`${client.client_id}:wrong`).toString("base64")}`]],
        body: "grant_type=client_credentials"
      })],
    [10, "bearer", () =>
      accessToken === undefined
        ? exchange("bearer", { method: "GET", path: "/api/health" })
        : random() < 0.5
        ? exchange("bearer", { method: "GET", path: "/api/health", headers: [["Authorization", `Bearer ${accessToken}`]] })
        : exchange("bearer", jsonPost("/api/v1/exchange-rates", ratesBody(), [["Authorization", `Bearer ${accessToken}`]]))],
    [25, "bad", () => {
      const bad: ReadonlyArray<() => RawRequest> = [
        () => jsonPost("/api/v1/exchange-rates", '{"cryptos": ['),
        () => ({ ...jsonPost("/api/subscribe", { email: "x@example.com", locale: "en" }), headers: [["Content-Type", "text/plain"]] }),
        () => ({ method: "GET", path: `/nope/${seq++}` }),
        () => ({ method: "DELETE", path: "/api/health" }),
        () => ({ method: "GET", path: "/api/subscribe" }),
        () => jsonPost("/api/v1/exchange-rates", { cryptos: ["BTC"], pad: "x".repeat(20_000) }),
        () => jsonPost("/api/v1/exchange-rates", { cryptos: [] }),
        () => jsonPost("/api/subscribe", { email: "not-an-address", locale: "en" }),
        () => jsonPost("/api/subscribe", { email: "a@example.com", locale: "xx", extra: 1 }),
        () => ({ method: "GET", path: "/api/health", headers: [["Authorization", "Bearer not.a.token"]] }),
        () => ({ ...jsonPost("/api/v1/exchange-rates", { cryptos: ["BTC"] }), headers: [["Content-Type", "application/json"], ["Content-Encoding", "gzip"]] })
      ]
      return exchange("bad", pick(bad)())
    }]
  ]
  const totalWeight = traffic.reduce((n, [w]) => n + w, 0)
  const nextRequest = () => {
    let r = random() * totalWeight
    for (const [weight, , run] of traffic) {
      r -= weight
      if (r < 0) return run()
    }
    return traffic[0]![2]()
  }

  return { durations, byStatus, byKind, accepted, sentAddresses, failedSubscriptions: () => failedSubscriptions, nextRequest }
}
