/**
 * Issue 42: GET /api/v1/rates behind a real caching proxy (Debian's nginx, test/support/nginx.ts, with the
 * configuration docs/cdn.md shows), the service as `npm start` runs it over the emulators (test/support/cdn.ts).
 * - 1,000 visits from 200 addresses over 30 s, the landing page's three queries: every answer 200, the origin
 *   asked for at most a quarter of them (its own request count), no answer kept past what it allowed and no
 *   price older than the answer's max-age plus its age;
 * - limits still count visitors: 61 uncached requests from one address in a minute, the 61st is 429;
 * - a CoinGecko outage behind the cache (a fresh origin with no copies, CoinGecko failing, no second source):
 *   the cache answers with its stale copies, within their stale-if-error.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CdnRig, driveVisits, LANDING_QUERIES, priceAgeSeconds, requestsServed, startCdnRig, type Visit, visit, visitorAddress, warmUpLanding } from "../../support/cdn.ts"
import { freePort, type ServiceProcess, spawnService, tempDataDir } from "../../support/spawn.ts"

const VISITS = 1_000
const ADDRESSES = 200
const WINDOW_MS = 30_000
/** Slack for the live prices' own age at the origin, as the live landing test allows (rates-live-landing.test.ts). */
const LIVE_PRICE_SLACK_S = 10

const summary = (visits: ReadonlyArray<Visit>) => {
  const by: Record<string, number> = {}
  for (const v of visits) by[`${v.status} ${v.cacheStatus ?? "-"}`] = (by[`${v.status} ${v.cacheStatus ?? "-"}`] ?? 0) + 1
  return JSON.stringify(by)
}

describe("GET /api/v1/rates behind nginx", () => {
  let rig: CdnRig
  let outageOrigin: ServiceProcess | undefined
  beforeAll(async () => {
    rig = await startCdnRig({ cache: true })
    await warmUpLanding(rig.url)
  }, 150_000)
  afterAll(async () => {
    await outageOrigin?.stop("SIGKILL")
    await rig?.close()
  })

  it("1,000 visits from 200 addresses in 30 s: all 200, at most a quarter reach the origin, no price older than max-age plus its age", async () => {
    const before = await rig.originRequests()
    const visits = await driveVisits(rig.url, { total: VISITS, durationMs: WINDOW_MS, addresses: ADDRESSES })
    const originRequests = (await rig.originRequests()) - before
    const bad = visits.filter((v) => v.status !== 200)
    expect(bad.length, `answers other than 200: ${summary(visits)} ${JSON.stringify(bad.slice(0, 3))}`).toBe(0)
    // Each answer's age: since the origin's Date (whole seconds), which the proxy passes on.
    const ages = visits.map((v) => (v.at - v.date) / 1000)
    const kept = visits.map((v, i) => ages[i]! - (v.maxAge! + v.staleWhileRevalidate!))
    const priceOver = visits.map((v, i) => priceAgeSeconds(v) - (v.maxAge! + ages[i]!))
    console.log(
      `rates-cdn: ${VISITS} visits, ${originRequests} origin requests (${(originRequests / VISITS * 100).toFixed(1)}%); ${summary(visits)}; ` +
        `oldest price ${Math.max(...visits.map(priceAgeSeconds)).toFixed(1)} s; oldest answer ${Math.max(...ages).toFixed(1)} s; ` +
        `max-age ${Math.min(...visits.map((v) => v.maxAge!))}..${Math.max(...visits.map((v) => v.maxAge!))}; ` +
        `most by which a price's age passed max-age + age ${Math.max(...priceOver).toFixed(1)} s`
    )
    expect(originRequests).toBeGreaterThan(0)
    expect(originRequests).toBeLessThanOrEqual(VISITS / 4)
    // Most visits are the cache's own answers.
    expect(visits.filter((v) => v.cacheStatus === "HIT").length).toBeGreaterThan(VISITS / 2)
    // No answer served longer than it allowed (max-age, then stale while revalidating), Date's truncation aside.
    expect(Math.max(...kept)).toBeLessThanOrEqual(1)
    // No price older than the answer's max-age plus its age, but for the live prices' own age at the origin.
    expect(Math.max(...priceOver)).toBeLessThanOrEqual(LIVE_PRICE_SLACK_S)
    // One ETag per query at any time: the three queries' bodies each carry the answer's own query.
    for (const [q, query] of LANDING_QUERIES.entries()) {
      const days = Number(/days=(\d+)/.exec(query)![1])
      expect(visits.filter((_, i) => i % LANDING_QUERIES.length === q).every((v) => (JSON.parse(v.body) as { days: number }).days === days)).toBe(true)
    }
  }, 120_000)

  it("limits count visitors, not the proxy: 61 uncached requests from one address in a minute, the 61st is 429", async () => {
    const address = visitorAddress(0, 1, 30)
    const answers: Array<Visit> = []
    // A spelling never asked before each time (an ignored parameter): every one reaches the origin.
    for (let i = 0; i < 61; i++) answers.push(await visit(rig.url, `cryptos=BTC&days=7&visit=${i}`, address))
    expect(answers.slice(0, 60).map((v) => v.status)).toEqual(Array(60).fill(200))
    expect(answers.slice(0, 60).every((v) => v.cacheStatus === "MISS")).toBe(true)
    expect(answers[60]!.status).toBe(429)
    expect(answers[60]!.body).toContain("rate_limited")
    // Another visitor is not limited by that one.
    expect((await visit(rig.url, "cryptos=BTC&days=7&visit=other", visitorAddress(1, 2, 30))).status).toBe(200)
  }, 60_000)

  it("a CoinGecko outage behind the cache: its stale answers are served, within their stale-if-error", async () => {
    // The landing answers the cache holds now.
    const held = await Promise.all(LANDING_QUERIES.map((q, i) => visit(rig.url, q, visitorAddress(i, 3, 40))))
    expect(held.map((v) => v.status)).toEqual([200, 200, 200])
    // A fresh origin that cannot answer: no copies, CoinGecko failing, no second source.
    const outageFrom = Date.now()
    rig.coingecko.setFault({ mode: "5xx", status: 500 })
    const metricsPort = await freePort()
    outageOrigin = await spawnService({
      COINGECKO_BASE_URL: rig.coingecko.url,
      RATES_FALLBACK: "none",
      COINBASE_WS_URL: "none",
      DATA_DIR: tempDataDir(),
      TRUST_PROXY: "127.0.0.1/32",
      METRICS_PORT: String(metricsPort)
    }, 30_000)
    const direct = await visit(outageOrigin.url, LANDING_QUERIES[0]!, "127.0.0.1")
    expect([502, 503]).toContain(direct.status)
    await rig.proxy!.repoint(`127.0.0.1:${outageOrigin.port}`)
    // Until an uncached query comes back as the failing origin's problem: the proxy asks the new origin.
    for (let i = 0; ; i++) {
      const probe = await visit(rig.url, `cryptos=BTC&days=3&probe=${i}`, visitorAddress(2, 3, 40))
      if (probe.status === 502 || probe.status === 503) break
      expect(i, `the proxy still answers from the old origin: ${probe.status}`).toBeLessThan(200)
      await new Promise((r) => setTimeout(r, 50))
    }
    const servedBefore = await requestsServed(metricsPort)
    // Past the held answers' max-age and stale-while-revalidate: only stale-if-error lets the cache answer.
    const expired = Math.max(...held.map((v) => v.date + (v.maxAge! + v.staleWhileRevalidate! + 1) * 1_000))
    while (Date.now() < expired) await new Promise((r) => setTimeout(r, 100))
    const during: Array<Visit> = []
    for (let round = 0; round < 5; round++) {
      during.push(...await Promise.all(LANDING_QUERIES.map((q, i) => visit(rig.url, q, visitorAddress(round * 3 + i, 200, 41)))))
      await new Promise((r) => setTimeout(r, 300))
    }
    console.log(`rates-cdn outage: ${summary(during)}; the failing origin asked ${(await requestsServed(metricsPort)) - servedBefore} times`)
    expect(during.map((v) => v.status)).toEqual(Array(during.length).fill(200))
    expect(during.every((v) => v.cacheStatus === "STALE" || v.cacheStatus === "UPDATING")).toBe(true)
    // The answers the cache held before the outage, unchanged through it, each within the stale-if-error it was sent with.
    for (const [i, v] of during.entries()) {
      expect(v.body).toBe(during[i % 3]!.body)
      expect(v.date).toBeLessThan(outageFrom)
      expect((v.at - v.date) / 1000).toBeLessThanOrEqual(v.maxAge! + v.staleIfError!)
    }
    // The cache did ask the failing origin (in the background) and kept its stale copies.
    expect((await requestsServed(metricsPort)) - servedBefore).toBeGreaterThan(0)
  }, 120_000)
})
