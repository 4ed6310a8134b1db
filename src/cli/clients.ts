/**
 * Operator CLI for OAuth clients and signing keys (CONTRACT C6). Run with Node 24 (type stripping), through
 * `npm run --silent` (`-s`) so that npm prints no banner and stdout is the JSON alone (pipe it to jq):
 *
 *   npm run -s clients -- create --name NAME --scope "rates:read health:read"
 *       → {"client_id": "...", "client_secret": "..."}   (the secret is shown this once)
 *   npm run -s clients -- create --name NAME --scope S --jwks-file FILE | --jwks-uri URL   (private_key_jwt)
 *       → {"client_id": "...", "token_endpoint_auth_method": "private_key_jwt", "kids": [...], ...}
 *   npm run -s clients -- list             → JSON array of clients (never hashes or secrets)
 *   npm run -s clients -- revoke ID        → {"client_id": "...", "status": "revoked"}
 *   npm run -s clients -- rotate ID        → {"client_id": "...", "client_secret": "..."} (new secret)
 *   npm run -s clients -- rotate ID --jwks-file FILE | --jwks-uri URL   → a key client's new keys
 *   npm run -s clients -- rotate-key       → new signing key (PostgreSQL or DATA_DIR), previous ones stay published;
 *                                             with OAUTH_SIGNING_KEYS set, prints that variable's next value
 *   npm run -s clients -- generate-key     → {"keys": [private JWK]} for OAUTH_SIGNING_KEYS
 *
 * `npm run clients` without --silent, into a pipe or a file, is refused before anything changes: npm's
 * banner would precede the JSON there, and a secret shown once would be lost with the broken output.
 *
 * Reads the same environment as the server (DATABASE_URL, DATA_DIR, OAUTH_CLIENTS_FILE, OAUTH_SECRET_PEPPER,
 * OAUTH_SIGNING_KEYS) and must be given the server's values. With DATABASE_URL the clients and keys are in
 * PostgreSQL: every instance sees a change within a second (NOTIFY, else a 500 ms poll), whatever
 * machine the CLI runs on. Without it they are files under DATA_DIR: a client written to another
 * DATA_DIR is unknown to the server (401); a running server picks changes up within about a second.
 * Exit codes: 0 done, 1 failed (not found, revoked, storage, configuration, a jwks_uri that cannot be
 * fetched), 2 bad usage or input. Results go to stdout as JSON; messages and logs go to stderr.
 *
 * A `--jwks-uri` is fetched once before anything is registered, under the server's rules (https with
 * APP_ENV=production, OAUTH_JWKS_URI_ALLOWED_NETWORKS), so that the operator sees its key ids, or why the
 * server could not use it.
 */
import { readFileSync } from "node:fs"
import * as UpstreamHttp from "../platform/upstreamHttp.ts"
import { Effect, Layer, Logger, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { type ClientKeysInput, ClientRegistry, type IssuedCredentials } from "../oauth/ClientRegistry.ts"
import { RemoteJwks } from "../oauth/jwksUri/RemoteJwks.ts"
import type { ClientAuth, OAuthClient } from "../oauth/oauthClient.ts"
import { OAuthConfig } from "../oauth/OAuthConfig.ts"
import { Scopes } from "../oauth/scopes.ts"
import { generateSigningJwk } from "../oauth/keyMaterial.ts"
import { nextConfiguredJwks, SigningKeys } from "../oauth/SigningKeys.ts"

const USAGE = `usage: clients <command>
  create --name NAME --scope "SCOPE [SCOPE...]"   register a client; prints its id and secret once
         [--jwks-file FILE | --jwks-uri URL]      ... or a private_key_jwt client with these public keys (no secret)
         [--auth-method private_key_jwt]          (implied by --jwks-file or --jwks-uri)
  list                                            list clients (no secrets)
  revoke ID                                       revoke a client; its tokens stop working
  rotate ID                                       issue a new secret; the old one stops working
  rotate ID --jwks-file FILE | --jwks-uri URL     a private_key_jwt client's new keys; the old ones stop working
  rotate-key                                      add a new token signing key (old keys stay published)
  generate-key                                    print a new private JWKS for OAUTH_SIGNING_KEYS
scopes: ${Scopes.join(" ")}`

class UsageError extends Error {}

/** Exits with a message; never prints a secret (messages come from typed errors that carry none). */
const die = (code: 1 | 2, message: string): never => {
  process.stderr.write(`clients: ${message}\n`)
  if (code === 2) process.stderr.write(`${USAGE}\n`)
  process.exit(code)
}

/** The contract's literal format: {"client_id": ..., "client_secret": ...}. */
const credentialsJson = (issued: IssuedCredentials) =>
  `{"client_id": ${JSON.stringify(issued.client.clientId)}, "client_secret": ${
    JSON.stringify(Redacted.value(issued.clientSecret))
  }}`

/** RFC 7591 member names: the method, and a key client's jwks_uri or key ids. */
const authJson = (auth: ClientAuth) =>
  auth.method === "client_secret_basic"
    ? { token_endpoint_auth_method: auth.method }
    : auth.keys._tag === "Uri"
    ? { token_endpoint_auth_method: auth.method, jwks_uri: auth.keys.uri }
    : { token_endpoint_auth_method: auth.method, kids: auth.keys.jwks.keys.map((k) => k.kid) }

const clientJson = (c: OAuthClient) => ({
  client_id: c.clientId,
  name: c.name,
  scopes: c.scopes,
  ...authJson(c.auth),
  status: c.status,
  created_at: c.createdAt,
  rotated_at: c.rotatedAt ?? null
})

/** A key client as registered, with the key ids its jwks_uri published when fetched (`kids`). */
const keyClientJson = (c: OAuthClient, kids: ReadonlyArray<string> | undefined) =>
  JSON.stringify({ client_id: c.clientId, ...authJson(c.auth), ...(kids === undefined ? {} : { kids }) })

/** `--name VALUE`, `--name=VALUE`; `--scope` may repeat and each value may hold several scopes. */
const parseOptions = (args: ReadonlyArray<string>, allowed: ReadonlyArray<string>) => {
  const options = new Map<string, Array<string>>()
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const match = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg)
    if (match === null) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`)
    const name = match[1]!
    if (!allowed.includes(name)) throw new UsageError(`unknown option --${name}`)
    let value = match[2]
    if (value === undefined) {
      value = args[++i]
      if (value === undefined) throw new UsageError(`--${name} needs a value`)
    }
    options.set(name, [...(options.get(name) ?? []), value])
  }
  return options
}

/** Exactly one positional argument (an id may start with "-", so `--` may precede it). */
const singleId = (args: ReadonlyArray<string>, command: string): string => {
  const rest = args[0] === "--" ? args.slice(1) : args
  if (rest.length !== 1 || rest[0] === "") throw new UsageError(`${command} takes exactly one client id`)
  return rest[0]!
}

/**
 * `npm run clients` (this script's own npm event) without --silent writes "> crypto-landing-api@1.0.0 clients"
 * to stdout before this process starts. On a terminal that is only noise; into a pipe or a file it
 * breaks the JSON. (`npm run demo` and the tests run this file directly: another event, or none.)
 */
const npmBannerOnStdout = () =>
  process.env.npm_lifecycle_event === "clients" && process.env.npm_config_loglevel !== "silent" &&
  process.stdout.isTTY !== true

const out = (text: string) =>
  Effect.sync(() => {
    process.stdout.write(text + "\n")
  })

/** Typed errors of the OAuth core; each has a message that names the problem without secrets. */
type CliFailure = { readonly _tag: string; readonly message: string }
type Program = Effect.Effect<void, CliFailure>

const configLayer = OAuthConfig.layer.pipe(Layer.provideMerge(AppConfig.layer))
const registryLayer = ClientRegistry.layer.pipe(Layer.provideMerge(configLayer))

const withRegistry = <A>(f: (registry: ClientRegistry["Service"]) => Effect.Effect<A, CliFailure>, print: (a: A) => string): Program =>
  Effect.gen(function*() {
    const registry = yield* ClientRegistry
    yield* out(print(yield* f(registry)))
  }).pipe(Effect.provide(registryLayer))


/** The key ids a jwks_uri publishes now, fetched as the server would; nothing is registered when it cannot be. */
const publishedKids = (uri: string): Effect.Effect<ReadonlyArray<string>, CliFailure> =>
  Effect.gen(function*() {
    const remote = yield* RemoteJwks
    const published = yield* remote.keys("(registering)", uri)
    return published.jwks.keys.map((k) => k.kid)
  }).pipe(
    Effect.mapError((e): CliFailure => ({ _tag: "JwksUriUnusable", message: `the jwks_uri cannot be used (${e.reason}); nothing was registered` })),
    Effect.provide(RemoteJwks.layer.pipe(Layer.provide(UpstreamHttp.layer), Layer.provide(configLayer)))
  )

/** Registers (or replaces) a key client's keys: a JWKS file read here, or a jwks_uri fetched first. */
const withKeys = (keys: ClientKeysInput, register: (registry: ClientRegistry["Service"]) => Effect.Effect<OAuthClient, CliFailure>): Program =>
  Effect.gen(function*() {
    const kids = "jwksUri" in keys ? yield* publishedKids(keys.jwksUri) : undefined
    yield* withRegistry(register, (client) => keyClientJson(client, kids))
  })

/** `--jwks-file` (read and parsed here) or `--jwks-uri`, at most one; `undefined` when neither is given. */
const keysOption = (options: ReadonlyMap<string, ReadonlyArray<string>>): ClientKeysInput | undefined => {
  const file = options.get("jwks-file")
  const uri = options.get("jwks-uri")
  if ((file?.length ?? 0) + (uri?.length ?? 0) > 1) throw new UsageError("give one of --jwks-file and --jwks-uri, once")
  if (uri !== undefined) return { jwksUri: uri[0]! }
  if (file === undefined) return undefined
  let text: string
  try {
    text = readFileSync(file[0]!, "utf8")
  } catch (e) {
    throw new UsageError(`--jwks-file: cannot read ${JSON.stringify(file[0])} (${(e as NodeJS.ErrnoException).code ?? "error"})`)
  }
  try {
    return { jwks: JSON.parse(text) }
  } catch {
    throw new UsageError(`--jwks-file: ${JSON.stringify(file[0])} is not JSON (expected a JWK Set: {"keys": [...]})`)
  }
}

/** `ID` and options, in any order (an id may start with "-" after `--`). */
const idAndOptions = (args: ReadonlyArray<string>, command: string, allowed: ReadonlyArray<string>) => {
  const dashes = args.indexOf("--")
  const [before, after] = dashes < 0 ? [args, []] : [args.slice(0, dashes), args.slice(dashes + 1)]
  const positional: Array<string> = [...after]
  const optionArgs: Array<string> = []
  for (let i = 0; i < before.length; i++) {
    const arg = before[i]!
    if (!arg.startsWith("--")) positional.push(arg)
    else {
      optionArgs.push(arg)
      if (!arg.includes("=") && i + 1 < before.length) optionArgs.push(before[++i]!)
    }
  }
  if (positional.length !== 1 || positional[0] === "") throw new UsageError(`${command} takes exactly one client id`)
  return { id: positional[0]!, options: parseOptions(optionArgs, allowed) }
}

const rotateKey: Program = Effect.gen(function*() {
  const config = yield* OAuthConfig
  if (config.signingKeys !== undefined) {
    // Configured keys cannot be changed from here: print the variable's next value instead.
    const next = yield* Effect.promise(() => nextConfiguredJwks(Redacted.value(config.signingKeys!)))
    process.stderr.write(
      "clients: OAUTH_SIGNING_KEYS is set; replace it with the JWKS below (new key first, previous keys " +
        "public only) and restart every instance. Keep it secret: it holds a private key.\n"
    )
    return yield* out(JSON.stringify(next))
  }
  // Only now open (or create) the keys, in PostgreSQL or in DATA_DIR.
  const rotation = yield* Effect.gen(function*() {
    const keys = yield* SigningKeys
    return yield* keys.rotate()
  }).pipe(
    Effect.provide(SigningKeys.layer),
    Effect.provideService(OAuthConfig, config)
  )
  yield* out(JSON.stringify({
    kid: rotation.kid,
    published_kids: rotation.publishedKids,
    removed_kids: rotation.removedKids
  }))
}).pipe(Effect.provide(configLayer))

const parseCommand = (argv: ReadonlyArray<string>): Program | "help" => {
  const [command, ...args] = argv
  switch (command) {
    case "create": {
      const options = parseOptions(args, ["name", "scope", "jwks-file", "jwks-uri", "auth-method"])
      const name = options.get("name")
      if (name === undefined || name.length !== 1) throw new UsageError("create needs exactly one --name")
      const scopes = (options.get("scope") ?? []).flatMap((s) => s.split(/\s+/)).filter((s) => s !== "")
      if (scopes.length === 0) throw new UsageError(`create needs --scope with one or more of: ${Scopes.join(" ")}`)
      const method = options.get("auth-method")
      const keys = keysOption(options)
      const wanted = keys === undefined ? "client_secret_basic" : "private_key_jwt"
      if (method !== undefined && (method.length !== 1 || method[0] !== wanted)) {
        throw new UsageError(
          `--auth-method ${method.join(",")}: private_key_jwt comes with --jwks-file or --jwks-uri, client_secret_basic without them`
        )
      }
      if (keys !== undefined) return withKeys(keys, (r) => r.createWithKeys({ name: name[0]!, scopes, keys }))
      return withRegistry((r) => r.create({ name: name[0]!, scopes }), credentialsJson)
    }
    case "list":
      if (args.length > 0) throw new UsageError("list takes no arguments")
      return withRegistry((r) => r.list(), (clients) => JSON.stringify(clients.map(clientJson), null, 2))
    case "revoke": {
      const id = singleId(args, "revoke")
      return withRegistry(
        (r) => r.revoke(id),
        (c) => `{"client_id": ${JSON.stringify(c.clientId)}, "status": ${JSON.stringify(c.status)}}`
      )
    }
    case "rotate": {
      const { id, options } = idAndOptions(args, "rotate", ["jwks-file", "jwks-uri"])
      const keys = keysOption(options)
      if (keys !== undefined) return withKeys(keys, (r) => r.replaceKeys(id, keys))
      return withRegistry((r) => r.rotate(id), credentialsJson)
    }
    case "rotate-key":
      if (args.length > 0) throw new UsageError("rotate-key takes no arguments")
      return rotateKey
    case "generate-key":
      if (args.length > 0) throw new UsageError("generate-key takes no arguments")
      return Effect.flatMap(Effect.promise(generateSigningJwk), (jwk) => out(JSON.stringify({ keys: [jwk] })))
    case "help":
    case "--help":
    case "-h":
      return "help"
    case undefined:
      throw new UsageError("missing command")
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`)
  }
}

// Logs (e.g. "signing key generated") go to stderr so that stdout holds only the JSON result.
const stderrLogger = Logger.layer([Logger.withConsoleError(Logger.formatSimple)])

const main = async (argv: ReadonlyArray<string>) => {
  let program: Program | "help"
  try {
    program = parseCommand(argv)
  } catch (e) {
    if (e instanceof UsageError) return die(2, e.message)
    throw e
  }
  if (program === "help") {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  if (npmBannerOnStdout()) {
    const command = argv.map((a) => (/^[\w.:=@/-]+$/.test(a) ? a : JSON.stringify(a))).join(" ")
    process.stderr.write(
      "clients: npm printed its banner on stdout, so the output would not be JSON alone (and a secret shown " +
        `once would be lost with it); nothing was changed. Run: npm run --silent clients -- ${command}\n`
    )
    process.exit(2)
  }
  const failure = await Effect.runPromise(
    program.pipe(
      Effect.as(undefined),
      Effect.catch((error) => Effect.succeed(error)),
      Effect.provide(stderrLogger)
    )
  )
  if (failure !== undefined) die(failure._tag === "InvalidClientInput" ? 2 : 1, failure.message)
}

main(process.argv.slice(2)).catch((e: unknown) => {
  // A defect: report the kind only, never the object (it could hold input the operator typed).
  die(1, `unexpected failure: ${e instanceof Error ? e.name + ": " + e.message : "unknown"}`)
})
