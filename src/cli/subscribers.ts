/**
 * The local subscriber list (NEWSLETTER_PROVIDER=local) as CSV: email,locale,subscribed_at.
 *
 *   node src/cli/subscribers.ts export [--out FILE] [--data-dir DIR]
 *
 * Reads DATA_DIR (default ./data) unless --data-dir is given. Without --out the CSV goes to stdout;
 * with --out it is written to a temporary file beside FILE and renamed, so FILE is never half-written.
 * Lines that cannot be read are skipped and counted on stderr.
 */
import { rename, writeFile } from "node:fs/promises"
import * as path from "node:path"
import { Effect } from "effect"
import { dataDir as dataDirConfig } from "../config/read.ts"
import { subscribersCsv } from "../newsletter/csv.ts"
import { readSubscribers, subscribersPath } from "../newsletter/local.ts"

const usage = "usage: node src/cli/subscribers.ts export [--out FILE] [--data-dir DIR]"

const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  const [command, ...rest] = argv
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(`${usage}\n`)
    return command === undefined ? 2 : 0
  }
  if (command !== "export") {
    process.stderr.write(`unknown command "${command}"\n${usage}\n`)
    return 2
  }
  let out: string | undefined
  // The server's reading of DATA_DIR (from the ConfigProvider: the environment), so both find one list.
  let dataDir = await Effect.runPromise(dataDirConfig)
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]
    const value = rest[i + 1]
    if ((arg === "--out" || arg === "--data-dir") && value !== undefined && value !== "") {
      if (arg === "--out") out = value
      else dataDir = value
      i++
    } else {
      process.stderr.write(`unexpected argument "${arg}"\n${usage}\n`)
      return 2
    }
  }

  const file = subscribersPath(dataDir)
  const { subscribers, badLines } = await readSubscribers(file)
  const csv = subscribersCsv(subscribers)
  if (out === undefined) {
    process.stdout.write(csv)
  } else {
    const target = path.resolve(out)
    const temporary = `${target}.${process.pid}.tmp`
    await writeFile(temporary, csv, { encoding: "utf8", mode: 0o600 })
    await rename(temporary, target)
    process.stderr.write(`${subscribers.length} subscriber(s) written to ${target}\n`)
  }
  if (badLines > 0) process.stderr.write(`warning: ${badLines} unreadable line(s) in ${file} were skipped\n`)
  return 0
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
