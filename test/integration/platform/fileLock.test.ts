/**
 * The lock file of `withFileLock` (src/platform/files.ts): one holder at a time, also when the lock met is
 * stale (left by a crashed process) and several contenders break it at once, each having judged the same
 * old lock stale: none of them may remove a lock that another has just taken.
 */
import { assert, describe, it } from "@effect/vitest"
import { mkdtempSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { withFileLock } from "../../../src/platform/files.ts"

/** Runs `contenders` lock holders at once on `file`; the most that held the lock at the same time. */
const race = (file: string, contenders: number) => {
  let inside = 0
  let most = 0
  const hold = Effect.acquireUseRelease(
    Effect.sync(() => {
      inside++
      most = Math.max(most, inside)
    }),
    () => Effect.sleep("5 millis"),
    () => Effect.sync(() => void inside--)
  )
  return Effect.map(
    Effect.all(Array.from({ length: contenders }, () => withFileLock(file, hold)), { concurrency: "unbounded" }),
    () => most
  )
}

describe("withFileLock", () => {
  it.live("one holder at a time", () =>
    Effect.gen(function*() {
      const file = join(mkdtempSync(join(tmpdir(), "lock-")), "state.json")
      assert.strictEqual(yield* race(file, 6), 1)
    }))

  it.live("a stale lock broken by several at once still leaves one holder at a time (60 trials)", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "lock-stale-"))
      for (let trial = 0; trial < 60; trial++) {
        const file = join(dir, `state-${trial}.json`)
        // Left by a crashed process a minute ago.
        writeFileSync(`${file}.lock`, "12345")
        const minuteAgo = new Date(Date.now() - 60_000)
        utimesSync(`${file}.lock`, minuteAgo, minuteAgo)
        assert.strictEqual(yield* race(file, 6), 1, `trial ${trial}: two held the lock at once`)
      }
    }), 60_000)
})
