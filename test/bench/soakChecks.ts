/**
 * The soak's verdicts (soak.ts), each failure handed to `violate`: memory and descriptors grown past their tolerance
 * or not given back, a subscription answered 200 but not with the provider exactly as accepted (or one there never
 * sent), an unhandled error or a missing access-log line in the service's log, a SIGTERM exit other than 0.
 */
import { spawnSync } from "node:child_process"
import type { BrevoEmulator } from "../emulators/brevo.ts"
import { ROOT } from "./common.ts"
import type { SoakOptions } from "./soakOptions.ts"
import type { MemoryReading, Sample, Service } from "./soakService.ts"
import { TEMPLATES } from "./soakTraffic.ts"

type Violate = (what: string) => void

const median = (xs: ReadonlyArray<number>) => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor((s.length - 1) / 2)]!
}

/**
 * Memory after a forced full GC at the end against after warm-up; descriptors in the last fifth of the run (1 s
 * samples, at least 3 s) against the first fifth after warm-up, and idle after against idle before.
 */
export const checkMemory = ({ atEnd, idleAfter, idleBefore, options, samples, seconds, violate, warm }: {
  readonly options: SoakOptions
  readonly samples: ReadonlyArray<Sample>
  /** How long the traffic ran. */
  readonly seconds: number
  readonly warm: MemoryReading
  readonly atEnd: MemoryReading
  readonly idleBefore: Sample
  readonly idleAfter: Sample
  readonly violate: Violate
}) => {
  const measured = samples.filter((s) => s.t >= options.warmupS && s.t <= seconds)
  const window = Math.max(3, Math.round((seconds - options.warmupS) * 0.2))
  const first = measured.filter((s) => s.t < options.warmupS + window)
  const last = measured.filter((s) => s.t > seconds - window)
  const fdFirst = median(first.map((s) => s.fds))
  const fdLast = median(last.map((s) => s.fds))
  const peakRssMb = Math.max(...samples.map((s) => s.rssKb)) / 1024
  if (!(atEnd.rssMb - warm.rssMb <= options.rssToleranceMb)) {
    violate(`RSS after a full GC grew from ${warm.rssMb.toFixed(1)} MB after warm-up to ${atEnd.rssMb.toFixed(1)} MB (tolerance ${options.rssToleranceMb} MB)`)
  }
  if (!(atEnd.heapUsedMb - warm.heapUsedMb <= options.heapToleranceMb)) {
    violate(`heap in use after a full GC grew from ${warm.heapUsedMb.toFixed(1)} MB after warm-up to ${atEnd.heapUsedMb.toFixed(1)} MB (tolerance ${options.heapToleranceMb} MB)`)
  }
  if (!(fdLast - fdFirst <= options.fdTolerance)) {
    violate(`open descriptors grew from ${fdFirst} after warm-up to ${fdLast} (tolerance ${options.fdTolerance})`)
  }
  if (idleAfter.fds > idleBefore.fds + options.fdTolerance) {
    violate(`descriptors not given back: ${idleBefore.fds} idle before, ${idleAfter.fds} idle after (tolerance ${options.fdTolerance})`)
  }
  return { fdFirst, fdLast, peakRssMb }
}

/** Every 200 is with the provider exactly as accepted; nothing else is. Read once the service has stopped. */
export const checkSubscriptions = ({ accepted, brevo, dataDir, options, sentAddresses, violate }: {
  readonly options: SoakOptions
  readonly brevo: BrevoEmulator
  readonly dataDir: string
  readonly accepted: ReadonlyMap<string, string>
  readonly sentAddresses: ReadonlySet<string>
  readonly violate: Violate
}): number => {
  let delivered = 0
  if (options.provider === "brevo") {
    const contacts = brevo.contacts()
    for (const [email, locale] of accepted) {
      const contact = contacts.get(email.toLowerCase())
      if (contact === undefined) violate(`subscription ${email} (${locale}) answered 200 but Brevo never got it`)
      else if (contact.email !== email || contact.attributes.LOCALE !== locale || contact.templateId !== TEMPLATES[locale] || !contact.listIds.includes(7)) {
        violate(`subscription ${email} (${locale}) reached Brevo as ${JSON.stringify(contact)}`)
      } else delivered++
    }
    for (const key of contacts.keys()) if (!sentAddresses.has(key)) violate(`Brevo holds ${key}, which was never submitted`)
  } else {
    const exported = spawnSync(process.execPath, ["src/cli/subscribers.ts", "export", "--data-dir", dataDir], { cwd: ROOT, encoding: "utf8" })
    if (exported.status !== 0) violate(`subscribers export failed: ${exported.stderr}`)
    const rows = new Map<string, string>()
    for (const line of exported.stdout.split("\n").slice(1)) {
      const [email, locale] = line.split(",")
      if (email !== undefined && email !== "" && locale !== undefined) rows.set(email, locale)
    }
    for (const [email, locale] of accepted) {
      const got = rows.get(email)
      if (got === undefined) violate(`subscription ${email} (${locale}) answered 200 but is not in the local list`)
      else if (got !== locale) violate(`subscription ${email} is in the local list with locale ${got}, accepted as ${locale}`)
      else delivered++
    }
    for (const email of rows.keys()) if (!sentAddresses.has(email)) violate(`the local list holds ${email}, which was never submitted`)
  }
  return delivered
}

/** No unhandled error logged, one access-log line per request, SIGTERM answered with exit code 0. */
export const checkServiceLog = ({ exitCode, requests, service, violate }: {
  readonly service: Service
  /** The requests answered, the /openapi.json fetch at the start not counted. */
  readonly requests: number
  readonly exitCode: number | null
  readonly violate: Violate
}) => {
  const serviceLog = service.scanLog()
  for (const line of serviceLog.unhandled) violate(`service logged: ${line}`)
  // C9: one access-log line per request (ours, plus the /openapi.json fetch at the start).
  if (serviceLog.requests !== requests + 1) {
    violate(`the access log has ${serviceLog.requests} request lines for ${requests + 1} requests answered`)
  }
  if (exitCode !== 0) violate(`SIGTERM: the service exited with ${exitCode}, expected 0\n${serviceLog.tail}`)
}
