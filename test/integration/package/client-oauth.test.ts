/**
 * The typed client's `requestToken`: client credentials sent as HTTP Basic (RFC 6749 §2.3.1), or a client
 * assertion signed with the client's private key (private_key_jwt, RFC 7523), every token-endpoint error
 * back as a typed `OAuthError` (`_tag`), Retry-After of a 429 included.
 */
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import * as jose from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ApiClientOptions, makeApiClient, OAuthError, type PrivateKeyCredentials } from "../../../src/client.ts"
import { startTestApp, type TestApp, testOAuth } from "../../support/app.ts"

let app: TestApp
let limited: TestApp
beforeAll(async () => {
  app = await startTestApp()
  limited = await startTestApp({ oauth: testOAuth({ maxFailuresPerMinute: 1 }) })
})
afterAll(async () => {
  await app?.close()
  await limited?.close()
})

const requestToken = (options: Omit<ApiClientOptions, "baseUrl"> & { readonly baseUrl?: string }, scope?: string) =>
  Effect.runPromise(
    Effect.flatMap(makeApiClient({ baseUrl: app.url, ...options }), (api) =>
      api.requestToken({ payload: { grant_type: "client_credentials", ...(scope === undefined ? {} : { scope }) } })).pipe(
        Effect.map((token) => ({ ok: token, error: undefined })),
        Effect.catchTag("OAuthError", (error) => Effect.succeed({ ok: undefined, error })),
        Effect.provide(FetchHttpClient.layer)
      )
  )

describe("typed client: requestToken", () => {
  it("sends the client credentials as Basic and returns the token", async () => {
    const result = await requestToken({ clientCredentials: { clientId: "svc-all", clientSecret: "secret-all" } }, "rates:read")
    expect(result.ok).toMatchObject({ token_type: "Bearer", scope: "rates:read" })
    expect(result.ok!.access_token.split(".")).toHaveLength(3)
  })

  it("never sends the Bearer token to the token endpoint", async () => {
    const result = await requestToken({
      accessToken: "not-a-token",
      clientCredentials: { clientId: "svc-health", clientSecret: "secret-health" }
    })
    expect(result.ok?.scope).toBe("health:read")
  })

  it("fails with OAuthError: invalid_client (401), invalid_scope (400), no credentials (401)", async () => {
    const wrong = await requestToken({ clientCredentials: { clientId: "svc-all", clientSecret: "nope" } })
    expect(wrong.error).toBeInstanceOf(OAuthError)
    expect(wrong.error).toMatchObject({ _tag: "OAuthError", error: "invalid_client", status: 401, code: "invalid_client" })
    expect(wrong.error!.type).toMatch(/\/problems\/invalid_client$/)
    const scope = await requestToken({ clientCredentials: { clientId: "svc-health", clientSecret: "secret-health" } }, "rates:read")
    expect(scope.error).toMatchObject({ _tag: "OAuthError", error: "invalid_scope", status: 400 })
    const none = await requestToken({})
    expect(none.error).toMatchObject({ _tag: "OAuthError", error: "invalid_client", status: 401 })
  })

  it("a 429 is an OAuthError with code rate_limited and retryAfter from the header", async () => {
    const wrong = { baseUrl: limited.url, clientCredentials: { clientId: "svc-all", clientSecret: "nope" } }
    let last: Awaited<ReturnType<typeof requestToken>> | undefined
    for (let i = 0; i < 3 && last?.error?.status !== 429; i++) last = await requestToken(wrong)
    expect(last?.error).toMatchObject({ _tag: "OAuthError", status: 429, error: "invalid_request", code: "rate_limited" })
    expect(last!.error!.retryAfter).toBeGreaterThan(0)
  })

  it("form-encodes the id and secret before Basic (RFC 6749 §2.3.1)", async () => {
    const seen: Array<string> = []
    const fetchSpy = ((_input: RequestInfo | URL, init?: RequestInit) => {
      seen.push(new Headers(init?.headers).get("authorization") ?? "")
      return Promise.resolve(new Response("{}", { status: 500, headers: { "content-type": "application/json" } }))
    }) as typeof fetch
    await Effect.runPromise(
      Effect.flatMap(
        makeApiClient({ baseUrl: app.url, clientCredentials: { clientId: "a b:c", clientSecret: "p&ss+wörd" } }),
        (api) => Effect.ignore(api.requestToken({ payload: { grant_type: "client_credentials" } }))
      ).pipe(Effect.provide(FetchHttpClient.layer), Effect.provideService(FetchHttpClient.Fetch, fetchSpy))
    )
    const decoded = atob(seen[0]!.replace(/^Basic /, ""))
    expect(decoded).toBe("a+b%3Ac:p%26ss%2Bw%C3%B6rd")
  })
})

describe("typed client: requestToken for a private_key_jwt client (issue 34)", () => {
  let keyed: TestApp
  const keys = new Map<string, { privateKey: CryptoKey; privateJwk: JsonWebKey }>()
  beforeAll(async () => {
    const jwks: Array<jose.JWK> = []
    for (const alg of ["ES256", "RS256", "PS256", "Ed25519"] as const) {
      const pair = await jose.generateKeyPair(alg, { extractable: true })
      keys.set(alg, { privateKey: pair.privateKey, privateJwk: await jose.exportJWK(pair.privateKey) as JsonWebKey })
      jwks.push({ ...(await jose.exportJWK(pair.publicKey)), kid: alg })
    }
    keyed = await startTestApp({ oauth: testOAuth({ clients: [{ name: "Keyed", clientId: "svc-keyed", scopes: ["rates:read"], keys: { jwks: { keys: jwks } } }] }) })
  })
  afterAll(() => keyed?.close())

  const keyedToken = (credentials: Omit<PrivateKeyCredentials, "clientId">) =>
    Effect.runPromise(
      Effect.flatMap(makeApiClient({ baseUrl: keyed.url, clientCredentials: { clientId: "svc-keyed", ...credentials } }), (api) =>
        api.requestToken({ payload: { grant_type: "client_credentials" } })).pipe(
          Effect.map((token) => ({ ok: token, error: undefined })),
          Effect.catchTags({ OAuthError: (error) => Effect.succeed({ ok: undefined, error }), ClientAssertionError: (error) => Effect.succeed({ ok: undefined, error }) }),
          Effect.provide(FetchHttpClient.layer)
        )
    )

  it.each(["ES256", "RS256", "PS256", "Ed25519"])("signs an assertion with a %s CryptoKey or private JWK; aud the service's issuer", async (alg) => {
    const { privateKey, privateJwk } = keys.get(alg)!
    const audience = "https://api.example.test" // the test app's PUBLIC_BASE_URL, not where it listens
    const viaKey = await keyedToken({ privateKey, kid: alg, audience, ...(alg === "PS256" ? { alg: "PS256" } : {}) })
    expect(viaKey.ok?.scope).toBe("rates:read")
    const viaJwk = await keyedToken({ privateKey: privateJwk, kid: alg, audience, ...(alg === "PS256" ? { alg: "PS256" } : {}) })
    expect(viaJwk.ok?.scope).toBe("rates:read")
  })

  it("a key of another client, or the wrong audience, is OAuthError invalid_client; an unusable key ClientAssertionError", async () => {
    const other = await jose.generateKeyPair("ES256")
    expect((await keyedToken({ privateKey: other.privateKey, kid: "ES256", audience: "https://api.example.test" })).error)
      .toMatchObject({ _tag: "OAuthError", error: "invalid_client", status: 401 })
    expect((await keyedToken({ privateKey: keys.get("ES256")!.privateKey, kid: "ES256" })).error)
      .toMatchObject({ _tag: "OAuthError", error: "invalid_client" })
    const p384 = await jose.generateKeyPair("ES384")
    expect((await keyedToken({ privateKey: p384.privateKey })).error).toMatchObject({ _tag: "ClientAssertionError" })
  })
})
