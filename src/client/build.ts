/**
 * Builds the typed client package into dist/ (`npm run build:client`; `npm run pack:client` also packs it;
 * `--out DIR` builds elsewhere, as the tests do, leaving the checkout as it was):
 *
 *   dist/client.js + .d.ts, dist/api/*.js + .d.ts   tsc -p src/client/tsconfig.json (src/client.ts, src/api/)
 *   dist/package.json                               name/version of this repository, `exports` with
 *                                                   `types`/`import`, `effect` as the only (peer) dependency
 *   dist/README.md                                  how to use it
 *
 * This repository's package.json is the service (it pins Node 24 through the `node` package, and the
 * server's own packages); the client package is this separate manifest, so an integrator who installs
 * the tarball gets compiled JavaScript and `effect`, nothing else. The build refuses an emitted file that
 * imports anything but `effect` or a sibling file (a `node:` module or a server package would break
 * browsers and Node 20 installs), and any file outside src/client.ts and src/api/.
 */
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..")
const DEFAULT_DIST = join(ROOT, "dist")

const fail = (message: string): never => {
  process.stderr.write(`build:client: ${message}\n`)
  process.exit(1)
}

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)]
  )

/** Every module specifier of an emitted .js or .d.ts file (static, dynamic and `import("...")` types). */
const specifiers = (text: string): Array<string> =>
  [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']/g)].map((m) => m[1]!)

export const buildClient = (DIST = DEFAULT_DIST): { readonly dir: string; readonly files: ReadonlyArray<string> } => {
  rmSync(DIST, { recursive: true, force: true })
  const tsc = spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "src/client/tsconfig.json", "--outDir", DIST], {
    cwd: ROOT,
    encoding: "utf8"
  })
  if (tsc.status !== 0) fail(`tsc -p src/client/tsconfig.json failed:\n${tsc.stdout}${tsc.stderr}`)

  const files = filesUnder(DIST).map((file) => relative(DIST, file)).sort()
  for (const file of files) {
    if (!/^(client|api\/[A-Za-z]+)\.(js|d\.ts)$/.test(file)) fail(`unexpected file in the client graph: ${file}`)
    const path = join(DIST, file)
    let text = readFileSync(path, "utf8")
    if (file.endsWith(".d.ts")) {
      // tsc rewrites ".ts" specifiers in the JavaScript only; declarations must name the .js files too.
      text = text.replace(/((?:from\s*|import\s*\(\s*)["']\.{1,2}\/[^"']+)\.ts(["'])/g, "$1.js$2")
      writeFileSync(path, text)
    }
    for (const specifier of specifiers(text)) {
      const allowed = specifier === "effect" || specifier.startsWith("effect/") ||
        /^\.{1,2}\/.*\.js$/.test(specifier)
      if (!allowed) fail(`${file} imports ${JSON.stringify(specifier)}: the client may import only effect and its own files`)
    }
  }

  const root = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"))
  const effectVersion: string = root.dependencies.effect
  const entry = (name: string) => ({ types: `./${name}.d.ts`, import: `./${name}.js`, default: `./${name}.js` })
  const manifest = {
    name: root.name,
    version: root.version,
    description: "Typed client (Effect HttpApi) for the Crypto landing API: compiled ESM and type declarations",
    type: "module",
    exports: {
      ".": entry("client"),
      "./client": entry("client"),
      "./api": entry("api/Api"),
      "./package.json": "./package.json"
    },
    types: "./client.d.ts",
    sideEffects: false,
    files: ["client.js", "client.d.ts", "api/", "README.md"],
    engines: { node: ">=20" },
    // One copy of effect with the application's own (its HttpClient layer, its Schema classes).
    peerDependencies: { effect: `~${effectVersion.replace(/^[~^]/, "")}` }
  }
  writeFileSync(join(DIST, "package.json"), JSON.stringify(manifest, null, 2) + "\n")
  writeFileSync(join(DIST, "README.md"), README(manifest.name, manifest.peerDependencies.effect))
  return { dir: DIST, files: [...files, "package.json", "README.md"] }
}

const README = (name: string, effect: string) => `# ${name} (typed client)

Compiled ESM and \`.d.ts\` for Node.js 20+ and browser bundles; its only dependency is \`effect\` (${effect}).

\`\`\`sh
npm install effect@"${effect}" ./${name}-<version>.tgz
\`\`\`

\`\`\`ts
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { makeApiClient } from "${name}/client"

const program = Effect.gen(function*() {
  const api = yield* makeApiClient({ baseUrl: "https://api.example.com", clientCredentials: { clientId, clientSecret } })
  const token = yield* api.requestToken({ payload: { grant_type: "client_credentials", scope: "rates:read" } })
  const authed = yield* makeApiClient({ baseUrl: "https://api.example.com", accessToken: token.access_token })
  return yield* authed.getHistoricalExchangeRates({ payload: { cryptos: ["BTC", "ETH"], days: 7 } })
}).pipe(Effect.catchTag("OAuthError", (e) => Effect.fail(\`token refused: \${e.error}\`)))

Effect.runPromise(program.pipe(Effect.provide(FetchHttpClient.layer)))
\`\`\`

A client registered for \`private_key_jwt\` passes its private key instead of a secret (a Web Crypto \`CryptoKey\`
or a private JWK: RSA, EC P-256 or Ed25519); \`requestToken\` signs a fresh client assertion with it each time:
\`clientCredentials: { clientId, privateKey, kid }\`.

Every failure has a \`_tag\`: the problem classes (\`ValidationFailed\`, \`ServiceUnavailable\`, ...),
\`OAuthError\` for the token endpoint and \`ClientAssertionError\` for a key that cannot sign.
`

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv.indexOf("--out")
  const built = buildClient(out === -1 ? undefined : resolve(process.argv[out + 1] ?? fail("--out needs a directory")))
  process.stderr.write(`build:client: ${built.files.length} files in ${relative(process.cwd(), built.dir) || "."}/\n`)
  if (process.argv.includes("--pack")) {
    // npm pack of the folder packs its own manifest (dist/package.json), not this repository's.
    const npm = process.env.npm_execpath
    const packed = npm === undefined
      ? spawnSync("npm", ["pack", built.dir], { cwd: ROOT, stdio: "inherit" })
      : spawnSync(process.execPath, [npm, "pack", built.dir], { cwd: ROOT, stdio: "inherit" })
    process.exit(packed.status ?? 1)
  }
}
