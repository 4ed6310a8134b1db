/**
 * The caller's address of CONTRACT C2 (TRUST_PROXY) and the bucket C8 counts it in, rule by rule. The
 * attacks over real HTTP are in test/unit/security/client-address.test.ts.
 */
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { parseTrustProxy } from "../../../src/config/AppConfig.ts"
import { addressBucket, makeClientIp, makeIsTrustedPeer } from "../../../src/http/clientIp.ts"

const rule = (value: string) => Result.getOrThrow(parseTrustProxy(value))
const clientOf = (trustProxy: string, forwardedFor: string | undefined, peer = "10.0.0.1") =>
  makeClientIp(rule(trustProxy))(forwardedFor, peer)

describe("TRUST_PROXY=false", () => {
  it("is the socket peer, whatever X-Forwarded-For says", () => {
    expect(clientOf("false", "198.51.100.7")).toBe("10.0.0.1")
    expect(clientOf("false", undefined, "::ffff:192.0.2.1")).toBe("192.0.2.1")
    expect(makeClientIp(rule("false"))(undefined, undefined)).toBe("unknown")
  })
})

describe("a hop count", () => {
  it("true: the rightmost entry (what the one proxy appended), not the caller's leftmost", () => {
    expect(clientOf("true", "6.6.6.6, 203.0.113.9")).toBe("203.0.113.9")
    expect(clientOf("true", "203.0.113.9")).toBe("203.0.113.9")
    expect(clientOf("true", undefined)).toBe("10.0.0.1")
  })

  it("N: the Nth entry from the right; with fewer entries, the leftmost", () => {
    expect(clientOf("2", "6.6.6.6, 203.0.113.9, 10.0.0.2")).toBe("203.0.113.9")
    expect(clientOf("3", "6.6.6.6, 203.0.113.9, 10.0.0.2")).toBe("6.6.6.6")
    expect(clientOf("5", "203.0.113.9, 10.0.0.2")).toBe("203.0.113.9")
  })

  it("an entry that is not an address is never the caller: the hop that forwarded it is", () => {
    expect(clientOf("true", "x".repeat(64))).toBe("10.0.0.1")
    expect(clientOf("true", "unknown")).toBe("10.0.0.1")
    expect(clientOf("2", "6.6.6.6, not-an-ip, 10.0.0.2")).toBe("10.0.0.2")
    expect(clientOf("true", "")).toBe("10.0.0.1")
    expect(clientOf("true", "203.0.113.9,")).toBe("10.0.0.1")
  })

  it("reads the forms proxies write: brackets, ports, mapped IPv4, upper case, spaces", () => {
    expect(clientOf("true", "[2001:DB8::1]")).toBe("2001:db8::1")
    expect(clientOf("true", "[2001:db8::1]:443")).toBe("2001:db8::1")
    expect(clientOf("true", "203.0.113.9:5000")).toBe("203.0.113.9")
    expect(clientOf("true", "  ::FFFF:203.0.113.9 ")).toBe("203.0.113.9")
    expect(clientOf("true", "2001:0db8:0000:0000:0000:0000:0000:0001")).toBe("2001:db8::1")
  })
})

describe("a CIDR list", () => {
  const trust = "10.0.0.0/8, 127.0.0.1, fd00::/8"

  it("skips trusted proxies from the right; the first untrusted entry is the caller", () => {
    expect(clientOf(trust, "6.6.6.6, 198.51.100.7, 10.1.2.3")).toBe("198.51.100.7")
    expect(clientOf(trust, "6.6.6.6, 198.51.100.7, fd00::5", "127.0.0.1")).toBe("198.51.100.7")
  })

  it("ignores X-Forwarded-For from a peer outside them", () => {
    expect(clientOf(trust, "198.51.100.7", "192.0.2.50")).toBe("192.0.2.50")
  })

  it("the leftmost entry when every entry is trusted; a non-address stops at the last trusted hop", () => {
    expect(clientOf(trust, "10.9.9.9, 10.1.2.3")).toBe("10.9.9.9")
    expect(clientOf(trust, "evil, 10.1.2.3")).toBe("10.1.2.3")
  })

  it("compares IPv4-mapped peers and networks as IPv4", () => {
    expect(clientOf(trust, "198.51.100.7", "::ffff:10.0.0.1")).toBe("198.51.100.7")
    expect(clientOf("::ffff:10.0.0.0/104", "198.51.100.7", "10.0.0.1")).toBe("198.51.100.7")
  })

  it("a long header of trusted-looking entries costs one step past the proxy's own", () => {
    const forged = Array.from({ length: 2000 }, (_, i) => `10.0.${i % 250}.1`).join(", ")
    expect(clientOf(trust, `${forged}, 198.51.100.7, 10.1.2.3`)).toBe("198.51.100.7")
  })
})

describe("trusted peers (exempt from the per-address connection cap)", () => {
  it("none without TRUST_PROXY, every peer with a hop count, the networks' with CIDRs", () => {
    expect(makeIsTrustedPeer(rule("false"))("10.0.0.1")).toBe(false)
    expect(makeIsTrustedPeer(rule("2"))("192.0.2.1")).toBe(true)
    expect(makeIsTrustedPeer(rule("10.0.0.0/8"))("::ffff:10.0.0.1")).toBe(true)
    expect(makeIsTrustedPeer(rule("10.0.0.0/8"))("192.0.2.1")).toBe(false)
  })
})

describe("the rate-limit bucket (C8)", () => {
  it("counts IPv4-mapped IPv6 as IPv4, IPv6 per /64 whatever its spelling", () => {
    expect(addressBucket("::ffff:1.2.3.4")).toBe("1.2.3.4")
    expect(addressBucket("::FFFF:1.2.3.4")).toBe("1.2.3.4")
    expect(addressBucket("1.2.3.4")).toBe("1.2.3.4")
    expect(addressBucket("2001:db8::1")).toBe("2001:db8::/64")
    expect(addressBucket("2001:DB8::2")).toBe("2001:db8::/64")
    expect(addressBucket("2001:db8:0:0:ffff:ffff:ffff:ffff")).toBe("2001:db8::/64")
    expect(addressBucket("2001:db8:0:1::1")).toBe("2001:db8:0:1::/64")
    expect(addressBucket("unknown")).toBe("unknown")
  })
})
