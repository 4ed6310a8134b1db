/**
 * Issue 34: where a client's jwks_uri may be fetched from (CONTRACT C6). https in production; never an
 * address in a private, loopback, link-local or other non-public range, however it is written (IPv6,
 * IPv4-mapped, NAT64, 6to4) or whatever name resolves to it, unless OAUTH_JWKS_URI_ALLOWED_NETWORKS
 * allows it; and the request goes to the address that was checked (no second resolution to rebind).
 */
import { BlockList } from "node:net"
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AddressPolicy, checkedTarget } from "../../../src/oauth/jwksUri/addressPolicy.ts"
import { readOAuthConfig } from "../../../src/oauth/OAuthConfig.ts"
import { configFrom } from "../../support/config.ts"
import { allowedNetworks } from "../../../src/oauth/jwksUri/RemoteJwks.ts"
import { TokenEndpoint } from "../../../src/oauth/TokenEndpoint.ts"
import { assertionFor, assertionForm, type ClientKey, jwksOf, makeKey, serveJwks } from "../../support/assertionKit.ts"
import { BASE, FORM, memoryRuntime } from "../../support/oauth.ts"

const production: AddressPolicy = { production: true, allowed: new BlockList() }
const development: AddressPolicy = { production: false, allowed: "all" }

const verdict = async (uri: string, policy: AddressPolicy) => {
  const exit = await Effect.runPromiseExit(checkedTarget(uri, policy))
  return Exit.isSuccess(exit) ? { url: exit.value.url.href, host: exit.value.host } : { refused: String(Exit.findErrorOption(exit).pipe((o) => o._tag === "Some" ? o.value : "")) }
}

describe("jwks_uri address policy", () => {
  it("production wants https", async () => {
    expect(await verdict("http://93.184.216.34/jwks", production)).toEqual({ refused: "jwks_uri must be https in production" })
    expect(await verdict("https://93.184.216.34/jwks", production)).toEqual({ url: "https://93.184.216.34/jwks", host: undefined })
  })

  it.each([
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "[::1]", "[fe80::1]", "[fd00::1]", "[::ffff:127.0.0.1]", "[::ffff:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::]"
  ])("refuses https://%s in production", async (host) => {
    expect((await verdict(`https://${host}/jwks`, production)).refused).toMatch(/is not public$/)
  })

  it("allows what OAUTH_JWKS_URI_ALLOWED_NETWORKS lists, and only that", async () => {
    const policy = { production: true, allowed: allowedNetworks(["10.20.0.0/16", "fd00::/8"]) }
    expect(await verdict("https://10.20.3.4/jwks", policy)).toMatchObject({ url: "https://10.20.3.4/jwks" })
    expect(await verdict("https://[fd00::5]/jwks", policy)).toMatchObject({ url: "https://[fd00::5]/jwks" })
    expect((await verdict("https://10.21.0.1/jwks", policy)).refused).toMatch(/not public/)
    expect((await verdict("https://127.0.0.1/jwks", policy)).refused).toMatch(/not public/)
  })

  it("outside production, http and local addresses are allowed (a developer's JWKS server)", async () => {
    expect(await verdict("http://127.0.0.1:8080/jwks", development)).toMatchObject({ url: "http://127.0.0.1:8080/jwks" })
  })

  it("checks every address a name resolves to, and sends the request to the checked one with the name as Host", async () => {
    const resolving = (addresses: ReadonlyArray<string>): AddressPolicy => ({ ...production, resolve: () => Promise.resolve(addresses) })
    expect(await verdict("https://jwks.example:8443/k", resolving(["93.184.216.34"]))).toEqual({ url: "https://93.184.216.34:8443/k", host: "jwks.example:8443" })
    expect(await verdict("https://jwks.example/k", resolving(["2606:2800:220:1::1"]))).toEqual({ url: "https://[2606:2800:220:1::1]/k", host: "jwks.example" })
    expect((await verdict("https://jwks.example/k", resolving(["93.184.216.34", "10.0.0.5"]))).refused).toMatch(/resolves to 10.0.0.5/)
    expect((await verdict("https://localhost/k", resolving(["127.0.0.1"]))).refused).toMatch(/resolves to 127.0.0.1/)
    const failing: AddressPolicy = { ...production, resolve: () => Promise.reject(new Error("ENOTFOUND")) }
    expect((await verdict("https://nowhere.example/k", failing)).refused).toMatch(/does not resolve/)
  })
})

describe("OAUTH_JWKS_URI_ALLOWED_NETWORKS", () => {
  const read = (env: Record<string, string>) => Effect.runPromiseExit(readOAuthConfig.pipe(Effect.provide(configFrom(env))))
  const production = { APP_ENV: "production", OAUTH_SECRET_PEPPER: "p".repeat(40), DATABASE_URL: "postgres://db.example/x" }

  it("defaults to none in production and to every network elsewhere; takes CIDRs, bare addresses or none", async () => {
    expect(await read(production)).toMatchObject({ _tag: "Success", value: { jwksUriAllowedNetworks: [] } })
    expect(await read({})).toMatchObject({ _tag: "Success", value: { jwksUriAllowedNetworks: "all" } })
    expect(await read({ ...production, OAUTH_JWKS_URI_ALLOWED_NETWORKS: "10.20.0.0/16, 192.168.1.7,fd00::/8" }))
      .toMatchObject({ value: { jwksUriAllowedNetworks: ["10.20.0.0/16", "192.168.1.7/32", "fd00::/8"] } })
    expect(await read({ OAUTH_JWKS_URI_ALLOWED_NETWORKS: "none" })).toMatchObject({ value: { jwksUriAllowedNetworks: [] } })
  })

  it("names the variable and the bad entry", async () => {
    const exit = await read({ OAUTH_JWKS_URI_ALLOWED_NETWORKS: "10.0.0.0/8,10.0.0.1/40" })
    expect(Exit.isFailure(exit)).toBe(true)
    expect(JSON.stringify(exit)).toContain('OAUTH_JWKS_URI_ALLOWED_NETWORKS: expected \\"none\\" or a comma list of CIDRs')
    expect(JSON.stringify(exit)).toContain("10.0.0.1/40")
  })
})

describe("the fetch goes to the address checked, not to a second resolution", () => {
  let server: Awaited<ReturnType<typeof serveJwks>>
  let runtime: ReturnType<typeof memoryRuntime>
  let key: ClientKey
  const resolved: Array<string> = []
  beforeAll(async () => {
    key = await makeKey("ES256")
    server = await serveJwks(jwksOf(key))
    runtime = memoryRuntime({
      clients: [{ name: "Named", clientId: "named", scopes: ["rates:read"], keys: { jwksUri: `http://jwks.integrator.test:${server.port}/jwks.json` } }],
      jwks: {
        resolve: (name) => {
          resolved.push(name)
          return Promise.resolve(["127.0.0.1"])
        }
      }
    })
  })
  afterAll(async () => {
    await runtime?.dispose()
    await server?.close()
  })

  it("resolves once, connects to 127.0.0.1 and sends Host: jwks.integrator.test", async () => {
    const assertion = await assertionFor(key, "named", { nowMs: Date.now(), audience: BASE })
    const res = await runtime.runPromise(Effect.flatMap(TokenEndpoint, (endpoint) =>
      endpoint.handle({ authorization: undefined, contentType: FORM, body: assertionForm(assertion), clientIp: "192.0.2.9" })))
    expect(res.outcome.reason).toBe("ok")
    expect(resolved).toEqual(["jwks.integrator.test"])
    expect(server.hosts).toEqual([`jwks.integrator.test:${server.port}`])
  })
})
