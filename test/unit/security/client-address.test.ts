/**
 * Issue 14, findings 1 and 2, over real HTTP: the caller's address behind proxies (C2 TRUST_PROXY)
 * and the bucket its requests are counted in (C8).
 *
 * 1. With TRUST_PROXY=true the leftmost X-Forwarded-For entry, which the caller writes, was the
 *    address: `X-Forwarded-For: 6.6.6.N, 203.0.113.9` (what an appending proxy forwards) gave every
 *    request a fresh limit, and any string of 64 characters counted as an address.
 * 2. Keys were the address text: `2001:db8::1`, `2001:db8::2`, `2001:DB8::1`, `::ffff:1.2.3.4` and
 *    `1.2.3.4` each had their own bucket.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"

const subscribe = (app: TestApp, forwardedFor?: string) =>
  fetch(`${app.url}/api/subscribe`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor }) },
    body: JSON.stringify({ email: "addr@example.com", locale: "en" })
  })

const statusesOf = async (app: TestApp, forwardedFor: ReadonlyArray<string | undefined>) => {
  const statuses: Array<number> = []
  for (const entry of forwardedFor) statuses.push((await subscribe(app, entry)).status)
  return statuses
}

/** The client addresses of the access log, in order, for the subscribe calls since `from`. */
const loggedAddresses = (app: TestApp, from: number) =>
  app.logs.slice(from).filter((line) => line.path === "/api/subscribe").map((line) => line.clientIp)

describe("TRUST_PROXY=true: one appending proxy", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ env: { TRUST_PROXY: "true", RATE_LIMIT_SUBSCRIBE_PER_MIN: "2" } })
  })
  afterAll(() => app.close())

  it("counts the address the proxy appended, not the entries the caller wrote before it", async () => {
    const from = app.logs.length
    const spoofed = [1, 2, 3, 4].map((n) => `6.6.6.${n}, 203.0.113.9`)
    expect(await statusesOf(app, spoofed)).toEqual([200, 200, 429, 429])
    expect(loggedAddresses(app, from)).toEqual(["203.0.113.9", "203.0.113.9", "203.0.113.9", "203.0.113.9"])
  })

  it("never takes a non-address for an address: the proxy that forwarded it is counted", async () => {
    const from = app.logs.length
    const junk = ["a".repeat(64), "b".repeat(64), "unknown", "c".repeat(64)]
    expect(await statusesOf(app, junk)).toEqual([200, 200, 429, 429])
    expect(loggedAddresses(app, from)).toEqual(["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1"])
  })
})

describe("TRUST_PROXY as CIDRs and as a hop count", () => {
  let cidrs: TestApp
  let hops: TestApp
  let untrusted: TestApp
  beforeAll(async () => {
    const limits = { RATE_LIMIT_SUBSCRIBE_PER_MIN: "1" }
    cidrs = await startTestApp({ env: { TRUST_PROXY: "127.0.0.1, 10.0.0.0/8", ...limits } })
    hops = await startTestApp({ env: { TRUST_PROXY: "2", ...limits } })
    untrusted = await startTestApp({ env: { TRUST_PROXY: "10.0.0.0/8", ...limits } })
  })
  afterAll(() => Promise.all([cidrs.close(), hops.close(), untrusted.close()]))

  it("CIDRs: the rightmost entry outside the trusted networks", async () => {
    const from = cidrs.logs.length
    expect(await statusesOf(cidrs, ["6.6.6.1, 198.51.100.7, 10.1.2.3", "6.6.6.2, 198.51.100.7, 10.1.2.4"])).toEqual([200, 429])
    expect(loggedAddresses(cidrs, from)).toEqual(["198.51.100.7", "198.51.100.7"])
  })

  it("a hop count: the entry that many hops from the server", async () => {
    const from = hops.logs.length
    expect(await statusesOf(hops, ["6.6.6.1, 198.51.100.8, 10.9.9.9", "6.6.6.2, 198.51.100.8, 10.9.9.8"])).toEqual([200, 429])
    expect(loggedAddresses(hops, from)).toEqual(["198.51.100.8", "198.51.100.8"])
  })

  it("a peer outside the trusted networks: its X-Forwarded-For is not read", async () => {
    const from = untrusted.logs.length
    expect(await statusesOf(untrusted, ["198.51.100.9", "198.51.100.10"])).toEqual([200, 429])
    expect(loggedAddresses(untrusted, from)).toEqual(["127.0.0.1", "127.0.0.1"])
  })
})

describe("rate-limit buckets (C8)", () => {
  let app: TestApp
  beforeAll(async () => {
    app = await startTestApp({ env: { TRUST_PROXY: "true", RATE_LIMIT_SUBSCRIBE_PER_MIN: "2" } })
  })
  afterAll(() => app.close())

  it("counts an IPv4-mapped IPv6 address as its IPv4 address", async () => {
    expect(await statusesOf(app, ["::ffff:192.0.2.1", "192.0.2.1", "::FFFF:192.0.2.1"])).toEqual([200, 200, 429])
  })

  it("counts IPv6 per /64, whatever the spelling; the access log keeps the full address", async () => {
    const from = app.logs.length
    const same64 = ["2001:db8::1", "2001:DB8::2", "2001:db8:0:0:ffff:ffff:ffff:ffff"]
    expect(await statusesOf(app, same64)).toEqual([200, 200, 429])
    expect(loggedAddresses(app, from)).toEqual(["2001:db8::1", "2001:db8::2", "2001:db8::ffff:ffff:ffff:ffff"])
    // The next /64 is someone else.
    expect(await statusesOf(app, ["2001:db8:0:1::1"])).toEqual([200])
  })
})
