/**
 * The check before a release, against the real providers (docs/deployment.md "Before a release"): one call of each kind the
 * service makes, with the service's own clients, schemas and User-Agent, and a few seconds of Coinbase's
 * feed; prints what each provider answered, and exits 1 on a refusal or an answer we cannot read.
 *
 *   npm run smoke:live [-- --feed-seconds 10]
 *
 * Configured as the service is (the environment: COINGECKO_API_KEY, the base URLs, NEWSLETTER_PROVIDER and
 * its credentials, UPSTREAM_USER_AGENT): the newsletter provider is read, never written (no sign-up).
 * npm test runs it against the emulators (test/integration/cli/smoke-live.test.ts).
 */
import { Effect, Layer, Logger, References } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { liveCheck as newsletterLiveCheck } from "../newsletter/liveCheck.ts"
import { readNewsletterConfig } from "../newsletter/NewsletterConfig.ts"
import * as UpstreamHttp from "../platform/upstreamHttp.ts"
import { ratesLiveCheck } from "../rates/liveCheck.ts"

const usage = "usage: npm run smoke:live [-- --feed-seconds N]   (N from 1 to 120, default 10)"

const feedSecondsOf = (argv: ReadonlyArray<string>): number | undefined => {
  if (argv.length === 0) return 10
  if (argv.length !== 2 || argv[0] !== "--feed-seconds") return undefined
  const seconds = Number(argv[1])
  return Number.isInteger(seconds) && seconds >= 1 && seconds <= 120 ? seconds : undefined
}

const newsletter = readNewsletterConfig.pipe(
  Effect.flatMap(newsletterLiveCheck),
  Effect.catch((error) => Effect.succeed([{ provider: "newsletter", call: "configuration", ok: false, detail: error.message }]))
)

const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  if (argv[0] === "--help" || argv[0] === "-h") {
    process.stdout.write(`${usage}\n`)
    return 0
  }
  const feedSeconds = feedSecondsOf(argv)
  if (feedSeconds === undefined) {
    process.stderr.write(`${usage}\n`)
    return 2
  }
  const results = await Effect.runPromise(
    Effect.all([ratesLiveCheck(feedSeconds), newsletter], { concurrency: "unbounded" }).pipe(
      Effect.map(([rates, letters]) => [...rates, ...letters]),
      Effect.provide(UpstreamHttp.layer.pipe(Layer.provide(AppConfig.layer))),
      // The clients' own warnings (a refusal, a feed lost) on stderr; stdout holds the report.
      Effect.provide(Logger.layer([Logger.withConsoleError(Logger.formatSimple)])),
      Effect.provideService(References.MinimumLogLevel, "Warn"),
      Effect.catch((error) => Effect.succeed([{ provider: "service", call: "configuration", ok: false, detail: error.message }]))
    )
  )
  const width = (key: "provider" | "call") => Math.max(...results.map((r) => r[key].length))
  for (const r of results) {
    process.stdout.write(`${r.ok ? "ok     " : "REFUSED"}  ${r.provider.padEnd(width("provider"))}  ${r.call.padEnd(width("call"))}  ${r.detail}\n`)
  }
  const failed = results.filter((r) => !r.ok).length
  process.stdout.write(`${results.length} calls, ${failed} refused or unreadable\n`)
  return failed === 0 ? 0 : 1
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`smoke:live: unexpected failure: ${e instanceof Error ? `${e.name}: ${e.message}` : "unknown"}\n`)
    process.exit(1)
  }
)
