import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Logger, Schema } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as ReloadingFile from "../../../src/platform/ReloadingFile.ts"

const dirs: Array<string> = []
afterAll(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})
const tmpFile = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reloading-file-"))
  dirs.push(dir)
  return path.join(dir, "state", "items.json")
}

const Items = Schema.Struct({ version: Schema.Literal(1), items: Schema.Array(Schema.String) })

/** A file of items; `load` refuses the item "forbidden" (what a schema alone cannot say). */
const options = (file: string, reloadIntervalMs: number, missing: ReloadingFile.Options<typeof Items.Type, ReadonlyArray<string>>["missing"] = { empty: { version: 1, items: [] } }) => ({
  file,
  schema: Items,
  load: (content: typeof Items.Type) =>
    content.items.includes("forbidden") ? Effect.fail("forbidden item") : Effect.succeed(content.items),
  store: (items: ReadonlyArray<string>) => ({ version: 1 as const, items }),
  missing,
  reloadIntervalMs,
  label: "items",
  describe: (items: ReadonlyArray<string>) => ({ count: items.length })
})

const logs: Array<string> = []
const capture = Logger.layer([Logger.make((o) => {
  logs.push(`${o.logLevel} ${String(o.message)}`)
})])
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.provide(effect, capture))
const open = (file: string, reloadIntervalMs: number, missing?: Parameters<typeof options>[2]) =>
  run(ReloadingFile.make(options(file, reloadIntervalMs, missing)))

const write = (file: string, value: unknown) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, typeof value === "string" ? value : JSON.stringify(value))
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("ReloadingFile", () => {
  it("reads an absent file as empty, and follows changes made by another writer", async () => {
    const file = tmpFile()
    const items = await open(file, 20)
    expect(await run(items.get)).toEqual([])
    expect(fs.existsSync(path.dirname(file))).toBe(true)
    write(file, { version: 1, items: ["a"] })
    await sleep(40)
    expect(await run(items.get)).toEqual(["a"])
    write(file, { version: 1, items: ["a", "b"] })
    await sleep(40)
    expect(await run(items.get)).toEqual(["a", "b"])
  })

  it("keeps the last good value when new content is invalid, logging each bad version once", async () => {
    const file = tmpFile()
    write(file, { version: 1, items: ["good"] })
    const items = await open(file, 10)
    logs.length = 0
    // Each bad version is logged once, even when two say the same.
    const bad = ["{ not json", "{ still not json", { version: 2, items: [] }, { version: 1, items: ["forbidden"] }]
    for (const content of bad) {
      write(file, content)
      for (let i = 0; i < 3; i++) {
        await sleep(20)
        expect(await run(items.get)).toEqual(["good"])
      }
    }
    expect(logs).toEqual(bad.map(() => "Warn items not reloaded; keeping the last good value"))
    write(file, { version: 1, items: ["better"] })
    await sleep(20)
    expect(await run(items.get)).toEqual(["better"])
    expect(logs.at(-1)).toBe("Info items reloaded")
  })

  it("names the file and the problem when the content is broken at start", async () => {
    const file = tmpFile()
    write(file, { version: 1, items: [1] })
    const exit = await Effect.runPromiseExit(ReloadingFile.make(options(file, 10)))
    expect(Exit.isFailure(exit)).toBe(true)
    const error = Exit.isFailure(exit) ? exit.cause.reasons[0] : undefined
    expect(error?._tag === "Fail" ? error.error.message : "").toBe(`${file}: items[0]: Expected string`)
  })

  it("re-checks the file at most once per interval; `latest` checks now", async () => {
    const file = tmpFile()
    write(file, { version: 1, items: ["old"] })
    const items = await open(file, 60_000)
    write(file, { version: 1, items: ["new", "er"] })
    await sleep(20)
    expect(await run(items.get)).toEqual(["old"])
    expect(await run(items.latest)).toEqual(["new", "er"])
  })

  it("modifies from disk under the lock, writes atomically with mode 0600, and a no-op writes nothing", async () => {
    const file = tmpFile()
    const one = await open(file, 60_000)
    const two = await open(file, 60_000)
    const add = (item: string) => (current: ReadonlyArray<string>) => Effect.succeed({ next: [...current, item], result: current.length })
    await Promise.all(Array.from({ length: 5 }, (_, i) => [run(one.modify(add(`one-${i}`))), run(two.modify(add(`two-${i}`)))]).flat())
    const stored = JSON.parse(fs.readFileSync(file, "utf8"))
    expect(stored.items).toHaveLength(10) // no lost update, though both caches were stale
    expect(fs.readFileSync(file, "utf8")).toBe(JSON.stringify(stored, null, 2) + "\n")
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    expect(fs.readdirSync(path.dirname(file))).toEqual(["items.json"])

    const before = fs.statSync(file, { bigint: true })
    expect(await run(one.modify((current) => Effect.succeed({ next: current, result: "same" })))).toBe("same")
    const after = fs.statSync(file, { bigint: true })
    expect([after.ino, after.mtimeNs]).toEqual([before.ino, before.mtimeNs])
    // The writer's own cache is current at once, without waiting for the interval.
    expect(await run(one.get)).toHaveLength(10)
  })

  it("refuses to write a value the schema rejects, and changes nothing", async () => {
    const file = tmpFile()
    const items = await open(file, 60_000)
    const exit = await Effect.runPromiseExit(items.modify(() => Effect.succeed({ next: [42 as unknown as string], result: undefined })))
    expect(Exit.isFailure(exit)).toBe(true)
    expect(fs.existsSync(file)).toBe(false)
    expect(await run(items.get)).toEqual([])
  })

  it("creates a missing file once, under the lock, when told to", async () => {
    const file = tmpFile()
    let calls = 0
    const create = Effect.sync(() => ({ version: 1 as const, items: [`created-${++calls}`] }))
    const opened = await Promise.all([1, 2, 3].map(() => run(ReloadingFile.make(options(file, 10, { create })))))
    expect(opened.filter((o) => o.created)).toHaveLength(1)
    expect(calls).toBe(1)
    for (const o of opened) expect(await run(o.get)).toEqual(["created-1"])

    // Once created, a file that disappears is an error: the last good value stays.
    fs.rmSync(file)
    await sleep(20)
    expect(await run(opened[0]!.get)).toEqual(["created-1"])
    expect((await Effect.runPromiseExit(opened[0]!.modify((c) => Effect.succeed({ next: c, result: 0 }))))._tag).toBe("Failure")
  })

  it("inMemory offers the same interface without a file", async () => {
    const items = ReloadingFile.inMemory<ReadonlyArray<string>>(["a"])
    expect(await run(items.modify((c) => Effect.succeed({ next: [...c, "b"], result: c.length })))).toBe(1)
    expect(await run(items.get)).toEqual(["a", "b"])
    const failed = await Effect.runPromiseExit(items.modify(() => Effect.fail("no")))
    expect(Exit.isFailure(failed)).toBe(true)
    expect(await run(items.latest)).toEqual(["a", "b"])
  })
})

describe("issueText", () => {
  it("joins path and message without echoing the input", () => {
    const Secretive = Schema.Struct({ keys: Schema.Array(Schema.Struct({ d: Schema.String.check(Schema.isMinLength(100)) })) })
    const result = Schema.decodeUnknownExit(Secretive)({ keys: [{ d: "SECRET-MATERIAL" }] })
    const issue = Exit.isFailure(result) && result.cause.reasons[0]?._tag === "Fail" ? result.cause.reasons[0].error.issue : undefined
    const text = ReloadingFile.issueText(issue!)
    expect(text).toMatch(/^keys\[0\]\.d: /)
    expect(text).not.toContain("SECRET-MATERIAL")
  })
})
