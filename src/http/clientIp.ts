/**
 * The caller's address (CONTRACT C2, C8) and the bucket it is counted in.
 *
 * Behind trusted proxies the caller is the rightmost X-Forwarded-For entry that is not a trusted proxy:
 * each proxy appends the address it received the request from, so whatever lies left of that entry
 * was written by the caller. An entry that is not an IP address is never trusted and never becomes
 * the caller: the nearest hop that forwarded it is counted instead (Effect's
 * `HttpMiddleware.xForwardedHeaders` walks the same way; it runs on an Effect request, the edge on
 * Node's, so the walk is here, on effect/net's parsing).
 */
import { Option, Result } from "effect"
import type { HttpServerRequest } from "effect/http"
import { IpNetwork, NetAddress } from "effect/net"
import type { TrustProxyRule } from "../config/AppConfig.ts"
import { exchangeOf } from "./exchange.ts"

interface Parsed {
  readonly address: NetAddress.IpAddress
  /** Canonical text: IPv4-mapped IPv6 as IPv4, IPv6 lower-case and compressed. */
  readonly text: string
  /** What rate limits count (C8): the IPv4 address, or the IPv6 /64 network. */
  readonly bucket: string
}

const parseUncached = (input: string): Parsed | undefined => {
  const bare = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input
  const ip = NetAddress.ipFromString(bare)
  // Some proxies write `address:port` (`[v6]:port`); the port says nothing of the caller.
  const found = Result.isSuccess(ip)
    ? ip.success
    : Result.getOrUndefined(Result.map(NetAddress.inetAddressFromString(input), (inet) => inet.address))
  if (found === undefined) return undefined
  const address = NetAddress.toCanonical(found)
  const text = NetAddress.formatIp(address)
  const bucket = NetAddress.isIpv6Address(address) ? IpNetwork.format(IpNetwork.fromAddressUnsafe(address, 64)) : text
  return { address, text, bucket }
}

// Parsing costs microseconds and callers repeat: a bounded memo (cleared when full) keeps it off the hot path.
const memoLimit = 10_000
const memo = new Map<string, Parsed | null>()
/** Longer than `[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535`: not an address (nor a memo key). */
const maxAddressText = 56
const parse = (input: string): Parsed | undefined => {
  const trimmed = input.trim()
  if (trimmed.length > maxAddressText) return undefined
  const known = memo.get(trimmed)
  if (known !== undefined) return known ?? undefined
  const parsed = parseUncached(trimmed)
  if (memo.size >= memoLimit) memo.clear()
  memo.set(trimmed, parsed ?? null)
  return parsed
}

/** The rate-limit bucket of an address text (C8): IPv4-mapped → IPv4, IPv6 → its /64; other text unchanged. */
export const addressBucket = (address: string): string => parse(address)?.bucket ?? address

/** An address in its canonical text (IPv4-mapped → IPv4, IPv6 compressed); other text unchanged. */
const canonicalAddress = (address: string): string => parse(address)?.text ?? address

/** A TRUST_PROXY network as the addresses it is compared with: `::ffff:a.b.c.d/n` as IPv4. */
const canonicalNetwork = (network: IpNetwork.IpNetwork): IpNetwork.IpNetwork => {
  const address = network.address
  if (NetAddress.isIpv4Address(address) || !NetAddress.isIpv4Mapped(address) || network.prefixLength < 96) return network
  return IpNetwork.fromAddressUnsafe(NetAddress.toCanonical(address), network.prefixLength - 96)
}

/** Whether the hop `distance` steps from the server (0: the socket peer) is a trusted proxy. */
type Trusted = (address: NetAddress.IpAddress, distance: number) => boolean

const trustedBy = (rule: TrustProxyRule): Trusted | undefined => {
  switch (rule._tag) {
    case "None":
      return undefined
    case "Hops":
      return (_, distance) => distance < rule.hops
    case "Cidrs": {
      const networks = rule.cidrs.map((cidr) => canonicalNetwork(IpNetwork.fromStringUnsafe(cidr)))
      return (address) => networks.some((network) => IpNetwork.contains(network, address))
    }
  }
}

/** The caller's address of a request: (X-Forwarded-For, socket peer) → canonical address text. */
export type ClientIpOf = (forwardedFor: string | undefined, peer: string | undefined) => string

export const makeClientIp = (rule: TrustProxyRule): ClientIpOf => {
  const trusted = trustedBy(rule)
  return (forwardedFor, peer) => {
    if (peer === undefined) return "unknown"
    const peerAddress = parse(peer)
    if (peerAddress === undefined) return peer
    if (trusted === undefined || forwardedFor === undefined || !trusted(peerAddress.address, 0)) return peerAddress.text
    // From the right, entry by entry, without splitting a header the caller may have made long.
    let nearest = peerAddress
    let end = forwardedFor.length
    for (let distance = 1; end >= 0; distance++) {
      const start = forwardedFor.lastIndexOf(",", end - 1)
      const entry = parse(forwardedFor.slice(start + 1, end))
      if (entry === undefined) return nearest.text
      // The leftmost entry is the caller even when trusted: nobody is left of it.
      if (start < 0 || !trusted(entry.address, distance)) return entry.text
      nearest = entry
      end = start
    }
    return nearest.text
  }
}

/**
 * The caller's address of a request the edge has seen (it resolved it per TRUST_PROXY), else the
 * socket peer: for handlers of the HttpApi (e.g. the token endpoint's failure limits).
 */
export const clientIp = (request: HttpServerRequest.HttpServerRequest): string =>
  exchangeOf(request)?.clientIp ?? canonicalAddress(Option.getOrElse(request.remoteAddress, () => "unknown"))

/**
 * Whether a socket peer is a trusted proxy (TRUST_PROXY): with a hop count every peer is; with CIDRs
 * the peers inside them; with `false` none.
 */
export const makeIsTrustedPeer = (rule: TrustProxyRule): (peer: string) => boolean => {
  const trusted = trustedBy(rule)
  if (trusted === undefined) return () => false
  return (peer) => {
    const parsed = parse(peer)
    return parsed !== undefined && trusted(parsed.address, 0)
  }
}
