/**
 * Bounded soak of the real service process (`node src/main.ts`) against the emulators.
 *
 *   npm run soak -- --duration 180 [--warmup 30] [--concurrency 8] [--provider brevo|local]
 *                   [--fault-period 10] [--rss-tolerance-mb 40] [--heap-tolerance-mb 16] [--fd-tolerance 16] [--seed 1]
 *
 * Starts the CoinGecko and Brevo emulators in this process, creates an OAuth client with the CLI, starts
 * the service with high rate limits and short upstream timeouts, then drives mixed traffic (health, rates
 * with varied symbols/currencies/days, subscriptions with unique addresses, token requests, Bearer calls,
 * bad requests) for the duration while upstream faults are switched on and off every fault period.
 *
 * It fails (exit 1) when:
 * - an answer breaks the HTTP invariants of the fuzz suite (test/support/fuzz/invariants.ts), a 500 included;
 * - the service logs an unhandled error;
 * - RSS (VmRSS) or the V8 heap in use, each read after a full GC forced through the inspector, or the
 *   open file descriptors (/proc/<pid>/fd) grow after warm-up by more than the tolerance, or
 *   descriptors are not given back once the clients are gone;
 * - a subscription answered 200 is not with the provider exactly as accepted (Brevo emulator contacts,
 *   or `node src/cli/subscribers.ts export` for the local list), or the provider holds one never sent;
 * - SIGTERM does not stop the service with exit code 0.
 *
 * Linux only (/proc). `runSoak` is also used by test/integration/fuzz/soak.test.ts for a short CI run.
 * Its parts beside it: soakOptions.ts (the flags), soakService.ts (the service process), soakTraffic.ts,
 * soakFaults.ts, soakChecks.ts (the verdicts) and soakReport.ts (the summary printed).
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { Agent } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrevoEmulator, startBrevoEmulator } from "../emulators/brevo.ts"
import { type CoinGeckoEmulator, startCoinGeckoEmulator } from "../emulators/coingecko.ts"
import { loadOpenApi, type OpenApiModel } from "../support/fuzz/openapi.ts"
import { freePort } from "../support/spawn.ts"
import { sleep } from "./common.ts"
import { checkMemory, checkServiceLog, checkSubscriptions } from "./soakChecks.ts"
import { scheduleFaults } from "./soakFaults.ts"
import { defaultSoakOptions, parseSoakArgs, type SoakOptions } from "./soakOptions.ts"
import { formatSummary, percentile, type SoakSummary } from "./soakReport.ts"
import { createClient, memoryAfterGc, type MemoryReading, type Sample, sample, serviceEnv, startService, stopService } from "./soakService.ts"
import { makeTraffic, prng } from "./soakTraffic.ts"

export { formatSummary }

export const runSoak = async (input: Partial<SoakOptions> = {}): Promise<SoakSummary> => {
  const options: SoakOptions = { ...defaultSoakOptions, ...input }
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const random = prng(options.seed)
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(random() * xs.length)]!
  const violations: Array<string> = []
  let violationCount = 0
  const violate = (what: string) => {
    violationCount++
    if (violations.length < 50) violations.push(what)
  }

  const coingecko: CoinGeckoEmulator = await startCoinGeckoEmulator({ host: "127.0.0.1" })
  const brevo: BrevoEmulator = await startBrevoEmulator({ host: "127.0.0.1" })
  let child: ChildProcess | undefined
  try {
    return await soakWith(options, log, random, pick, violate, () => ({ violations, violationCount }), coingecko, brevo, (c) => (child = c))
  } finally {
    if (child !== undefined && child.exitCode === null) child.kill("SIGKILL")
    await coingecko.close()
    await brevo.close()
  }
}

const soakWith = async (
  options: SoakOptions,
  log: (line: string) => void,
  random: () => number,
  pick: <A>(xs: ReadonlyArray<A>) => A,
  violate: (what: string) => void,
  verdicts: () => { violations: ReadonlyArray<string>; violationCount: number },
  coingecko: CoinGeckoEmulator,
  brevo: BrevoEmulator,
  onChild: (child: ChildProcess) => void
): Promise<SoakSummary> => {
  const dataDir = mkdtempSync(join(tmpdir(), "crypto-api-soak-"))
  const port = await freePort()
  const publicBaseUrl = `http://127.0.0.1:${port}`

  const client = createClient(dataDir)
  const service = await startService(serviceEnv({ options, port, publicBaseUrl, dataDir, coingecko, brevo }), port, join(dataDir, "service.log"))
  onChild(service.child)
  const pid = service.child.pid!

  const model: OpenApiModel = loadOpenApi(await (await fetch(`${service.url}/openapi.json`)).json())
  await sleep(300)
  const idleBefore = sample(pid, 0)

  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency })
  const { accepted, byKind, byStatus, durations, failedSubscriptions, nextRequest, sentAddresses } = makeTraffic({
    url: service.url,
    publicBaseUrl,
    agent,
    model,
    client,
    seed: options.seed,
    random,
    pick,
    violate
  })

  const startedAt = performance.now()
  const elapsedS = () => (performance.now() - startedAt) / 1000
  const samples: Array<Sample> = []
  const sampler = setInterval(() => {
    try {
      samples.push(sample(pid, elapsedS()))
    } catch {
      // the process is gone; the exit check reports it
    }
  }, 1_000)

  let atWarmup: Promise<MemoryReading> | undefined
  const faults = scheduleFaults({
    options,
    coingecko,
    brevo,
    elapsedS,
    log,
    afterWarmup: () => {
      atWarmup ??= memoryAfterGc(service.inspector, pid)
    }
  })

  const progress = setInterval(() => {
    const last = samples.at(-1)
    log(`[soak] ${Math.round(elapsedS())}s ${durations.length} requests, RSS ${last ? Math.round(last.rssKb / 1024) : "?"} MB, fds ${last?.fds ?? "?"}`)
  }, 15_000)

  log(`[soak] service pid ${pid} on ${service.url}; ${options.durationS}s with ${options.concurrency} clients, warm-up ${options.warmupS}s, provider ${options.provider}`)
  await Promise.all(Array.from({ length: options.concurrency }, async () => {
    const enough = () => durations.length >= (options.minRequests ?? 0) || elapsedS() >= options.durationS * 4
    while (elapsedS() < options.durationS || !enough()) await nextRequest()
  }))
  const seconds = elapsedS()
  // Read under the same conditions as at warm-up: just after the last request, before anything closes.
  const atEnd = await memoryAfterGc(service.inspector, pid)
  const warm = await (atWarmup ?? memoryAfterGc(service.inspector, pid))
  faults.stop()
  clearInterval(progress)
  clearInterval(sampler)
  faults.faultsOff()

  // Give every connection back, wait past the server's keep-alive timeout (5 s) and undici's (4 s).
  agent.destroy()
  await sleep(6_000)
  const idleAfter = sample(pid, elapsedS())

  const { fdFirst, fdLast, peakRssMb } = checkMemory({ options, samples, seconds, warm, atEnd, idleBefore, idleAfter, violate })
  const exitCode = await stopService(service.child) // the local list is complete once the process has stopped
  const delivered = checkSubscriptions({ options, brevo, dataDir, accepted, sentAddresses, violate })
  checkServiceLog({ service, requests: durations.length, exitCode, violate })

  const sorted = [...durations].sort((a, b) => a - b)
  return {
    options,
    requests: durations.length,
    seconds,
    byStatus,
    byKind,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.at(-1) ?? Number.NaN,
    rssMb: { idleBefore: idleBefore.rssKb / 1024, afterWarmup: warm.rssMb, end: atEnd.rssMb, peak: peakRssMb },
    heapUsedMb: { afterWarmup: warm.heapUsedMb, end: atEnd.heapUsedMb },
    fds: { idleBefore: idleBefore.fds, afterWarmup: fdFirst, end: fdLast, idleAfter: idleAfter.fds },
    faultsApplied: faults.faultsApplied,
    subscriptions: { accepted: accepted.size, failed: failedSubscriptions(), delivered },
    exitCode,
    ...verdicts()
  }
}

if (import.meta.main) {
  let options: Partial<SoakOptions>
  try {
    options = parseSoakArgs(process.argv.slice(2))
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`)
    process.exit(2)
  }
  const summary = await runSoak(options)
  process.stdout.write(`${formatSummary(summary)}\n`)
  process.exit(summary.violationCount === 0 ? 0 : 1)
}
