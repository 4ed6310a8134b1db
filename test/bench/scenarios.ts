/**
 * The benchmark's scenarios: one request each, replayed by wrk on every server (issue 17: the two
 * successes and the refusals a public API mostly sees from bots, scanners and broken clients).
 */

export interface ScenarioDef {
  readonly name: string
  readonly label: string
  readonly method: "GET" | "POST" | "DELETE"
  readonly path: string
  readonly body?: string
  readonly headers: Readonly<Record<string, string>>
  readonly expectStatus: number
  /** The issue 17 floor of service / raw node req/s. */
  readonly floorVsRaw: number
}

export const RATES_BODY = JSON.stringify({ cryptos: ["BTC", "ETH", "SOL"], days: 30 })

const json = { "Content-Type": "application/json" }

export const scenarioDefs: ReadonlyArray<ScenarioDef> = [
  { name: "health", label: "GET /api/health", method: "GET", path: "/api/health", headers: {}, expectStatus: 200, floorVsRaw: 0.6 },
  {
    name: "rates",
    label: "POST exchange-rates (hit)",
    method: "POST",
    path: "/api/v1/exchange-rates",
    body: RATES_BODY,
    headers: json,
    expectStatus: 200,
    floorVsRaw: 0.6
  },
  {
    name: "invalid",
    label: "POST exchange-rates 400",
    method: "POST",
    path: "/api/v1/exchange-rates",
    body: JSON.stringify({ cryptos: [] }),
    headers: json,
    expectStatus: 400,
    floorVsRaw: 0.4
  },
  {
    name: "malformed",
    label: "POST malformed JSON 400",
    method: "POST",
    path: "/api/v1/exchange-rates",
    body: "{\"cryptos\":[\"BTC\",",
    headers: json,
    expectStatus: 400,
    floorVsRaw: 0.4
  },
  { name: "notfound", label: "GET unknown path 404", method: "GET", path: "/api/v1/unknown", headers: {}, expectStatus: 404, floorVsRaw: 0.4 },
  { name: "method", label: "DELETE /api/health 405", method: "DELETE", path: "/api/health", headers: {}, expectStatus: 405, floorVsRaw: 0.4 }
]

/** Issue 17: every scenario at least as fast as the Fastify peer, and p99 under 10 ms. */
export const FLOOR_VS_FASTIFY = 1.0
export const P99_CEILING_MS = 10
