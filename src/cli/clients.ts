/**
 * Operator CLI for OAuth clients and signing keys (CONTRACT C6). Run with Node 24 (type stripping), through
 * `npm run --silent` (`-s`) so that npm prints no banner and stdout is the JSON alone (pipe it to jq):
 *
 *   npm run -s clients -- create --name NAME --scope "rates:read health:read"
 *       → {"client_id": "...", "client_secret": "..."}   (the secret is shown this once)
 *   npm run -s clients -- list             → JSON array of clients (never hashes or secrets)
 *   npm run -s clients -- revoke ID        → {"client_id": "...", "status": "revoked"}
 *   npm run -s clients -- rotate ID        → {"client_id": "...", "client_secret": "..."} (new secret)
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
 * Exit codes: 0 done, 1 failed (not found, revoked, storage, configuration), 2 bad usage or input.
 * Results go to stdout as JSON; messages and logs go to stderr.
 */
import { Effect, Layer, Logger, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { ClientRegistry, type IssuedCredentials } from "../oauth/ClientRegistry.ts"
import type { OAuthClient } from "../oauth/oauthClient.ts"
import { OAuthConfig } from "../oauth/OAuthConfig.ts"
import { Scopes } from "../oauth/scopes.ts"
import { generateSigningJwk } from "../oauth/keyMaterial.ts"
import { nextConfiguredJwks, SigningKeys } from "../oauth/SigningKeys.ts"

const USAGE = `usage: clients <command>
  create --name NAME --scope "SCOPE [SCOPE...]"   register a client; prints its id and secret once
  list                                            list clients (no secrets)
  revoke ID                                       revoke a client; its tokens stop working
  rotate ID                                       issue a new secret; the old one stops working
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

const clientJson = (c: OAuthClient) => ({
  client_id: c.clientId,
  name: c.name,
  scopes: c.scopes,
  status: c.status,
  created_at: c.createdAt,
  rotated_at: c.rotatedAt ?? null
})

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
      const options = parseOptions(args, ["name", "scope"])
      const name = options.get("name")
      if (name === undefined || name.length !== 1) throw new UsageError("create needs exactly one --name")
      const scopes = (options.get("scope") ?? []).flatMap((s) => s.split(/\s+/)).filter((s) => s !== "")
      if (scopes.length === 0) throw new UsageError(`create needs --scope with one or more of: ${Scopes.join(" ")}`)
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
      const id = singleId(args, "rotate")
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
