/**
 * Where the service may fetch a client's `jwks_uri` (CONTRACT C6): https in production, and never an
 * address in a private, loopback, link-local or otherwise non-public range (the service's own
 * network: metadata services, databases, admin ports) unless `OAUTH_JWKS_URI_ALLOWED_NETWORKS` allows it.
 *
 * The check is on the addresses the name resolves to, and the request then goes to the address that
 * was checked (the URL's host is replaced by it, the name kept in `Host`, from which the HTTP client
 * takes the TLS server name): a name that resolves to a public address when checked and to 127.0.0.1
 * when connected (DNS rebinding) never reaches 127.0.0.1. A name with any refused address is refused.
 */
import { BlockList, isIP } from "node:net"
import { lookup } from "node:dns/promises"
import { Effect } from "effect"

/** The ranges no jwks_uri may reach unless allowed (IPv4-mapped IPv6 addresses are checked as IPv4). */
const NON_PUBLIC: ReadonlyArray<readonly [network: string, prefix: number, family: "ipv4" | "ipv6"]> = [
  ["0.0.0.0", 8, "ipv4"], // "this" network
  ["10.0.0.0", 8, "ipv4"], // private
  ["100.64.0.0", 10, "ipv4"], // carrier-grade NAT
  ["127.0.0.0", 8, "ipv4"], // loopback
  ["169.254.0.0", 16, "ipv4"], // link-local (cloud metadata services)
  ["172.16.0.0", 12, "ipv4"], // private
  ["192.0.0.0", 24, "ipv4"], // IETF protocol assignments
  ["192.168.0.0", 16, "ipv4"], // private
  ["198.18.0.0", 15, "ipv4"], // benchmarking
  ["224.0.0.0", 4, "ipv4"], // multicast
  ["240.0.0.0", 4, "ipv4"], // reserved, broadcast
  ["::", 128, "ipv6"], // unspecified
  ["::1", 128, "ipv6"], // loopback
  ["fc00::", 7, "ipv6"], // unique local
  ["fe80::", 10, "ipv6"], // link-local
  ["fec0::", 10, "ipv6"], // site-local (deprecated)
  ["ff00::", 8, "ipv6"] // multicast
]

const nonPublic = new BlockList()
for (const [network, prefix, family] of NON_PUBLIC) nonPublic.addSubnet(network, prefix, family)

/** IPv4 embedded in NAT64 (64:ff9b::/96) or 6to4 (2002::/16) addresses, which route to that IPv4 address. */
const embeddedIpv4 = (address: string): string | undefined => {
  const groups = expandIpv6(address)
  if (groups === undefined) return undefined
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
  if (groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0)) return v4(groups[6]!, groups[7]!)
  if (groups[0] === 0x2002) return v4(groups[1]!, groups[2]!)
  return undefined
}

const expandIpv6 = (address: string): Array<number> | undefined => {
  if (isIP(address) !== 6 || address.includes(".")) return undefined
  const [head = "", tail] = address.split("::")
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)))
  const left = parse(head)
  const right = tail === undefined ? [] : parse(tail)
  return [...left, ...Array(8 - left.length - right.length).fill(0), ...right]
}

export interface AddressPolicy {
  /** `APP_ENV=production`: https only, and only public addresses unless `allowed` lists them. */
  readonly production: boolean
  /** Non-public networks a jwks_uri may reach anyway; `all` (the default outside production) allows every one. */
  readonly allowed: BlockList | "all"
  /** Name resolution; tests inject one. */
  readonly resolve?: ((hostname: string) => Promise<ReadonlyArray<string>>) | undefined
}

const systemResolve = async (hostname: string) => (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address)

/** Whether `address` is in a non-public range that the policy does not allow. */
const refused = (address: string, policy: AddressPolicy): boolean => {
  const family = isIP(address) === 4 ? "ipv4" : "ipv6"
  const embedded = embeddedIpv4(address)
  const inRange = (list: BlockList) => list.check(address, family) || (embedded !== undefined && list.check(embedded, "ipv4"))
  if (!inRange(nonPublic)) return false
  return policy.allowed === "all" ? false : !inRange(policy.allowed)
}

/** Where to send the request: the URL with the checked address as its host, and the `Host` to send. */
export interface Target {
  readonly url: URL
  /** Set when the host was a name: the request carries it (and TLS verifies it) while going to the address. */
  readonly host: string | undefined
}

/** The URL's scheme, then its addresses; a failure says why, for the log (never for the caller). */
export const checkedTarget = (uri: string, policy: AddressPolicy): Effect.Effect<Target, string> =>
  Effect.gen(function*() {
    const url = new URL(uri)
    if (url.protocol !== "https:" && (policy.production || url.protocol !== "http:")) {
      return yield* Effect.fail(`jwks_uri must be https${policy.production ? " in production" : ""}`)
    }
    const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1")
    if (isIP(hostname) !== 0) {
      if (refused(hostname, policy)) return yield* Effect.fail(`jwks_uri address ${hostname} is not public`)
      return { url, host: undefined }
    }
    const resolve = policy.resolve ?? systemResolve
    const addresses = yield* Effect.tryPromise({ try: () => resolve(hostname), catch: () => `jwks_uri host ${hostname} does not resolve` })
    if (addresses.length === 0) return yield* Effect.fail(`jwks_uri host ${hostname} does not resolve`)
    const bad = addresses.find((a) => refused(a, policy))
    if (bad !== undefined) return yield* Effect.fail(`jwks_uri host ${hostname} resolves to ${bad}, which is not public`)
    const address = addresses[0]!
    const target = new URL(url.href)
    target.hostname = isIP(address) === 6 ? `[${address}]` : address
    return { url: target, host: url.host }
  })
