import { join } from "node:path"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

// Node's compile cache for every process the tests start (test/support/spawn.ts `childEnv`): the service and the CLIs
// load their modules in about half the time (0.8 s → 0.4 s of CPU for the clients CLI).
process.env.NODE_COMPILE_CACHE ??= join(process.cwd(), "node_modules/.cache/node-compile-cache")

/**
 * Two projects, both run by `npm test`: `unit`, in this process only (emulators and servers started
 * in-process, the machine's Redis and PostgreSQL) and quick, for the inner loop (`npm run test:unit`,
 * under a minute); `integration`, which spawns processes (the service, the CLI, redis-server,
 * PostgreSQL, Chromium, npm), waits on real time (timeouts, breakers, slow peers) or runs long scenarios.
 */
const unitFolders = ["rates", "http", "oauth", "newsletter", "platform", "config", "security"].map((folder) => `test/${folder}/**/*.test.ts`)
/** In those folders, the tests that spawn a process or wait seconds on purpose: they are integration's. */
const integrationToo = [
  "test/rates/emulator.test.ts",
  "test/rates/coinbase-emulator.test.ts",
  "test/rates/coinbase-feed-emulator.test.ts",
  "test/rates/coingecko/redis.test.ts",
  "test/rates/copies/lease.test.ts",
  "test/http/docs.test.ts",
  "test/oauth/cli.test.ts",
  "test/newsletter/local.test.ts",
  "test/newsletter/emulators.test.ts",
  "test/config/config.test.ts",
  "test/security/token-failures-shared.test.ts",
  "test/rates/coinbase/faults.test.ts",
  "test/rates/coinbase/liveQuotes.test.ts",
  "test/rates/coinbase/liveFeedShared.test.ts",
  "test/rates/coingecko/faults.test.ts",
  "test/rates/memory-bound.test.ts",
  "test/security/slow-requests.test.ts",
  "test/platform/fileLock.test.ts",
  "test/newsletter/brevo.test.ts",
  "test/newsletter/listmonk.test.ts",
  // Mocks a module (jose): it needs a module graph of its own.
  "test/security/bearer-flood.test.ts"
]

/**
 * The files that take a minute or more (long scenarios on real time) start first: vitest orders files by the times of
 * its last run, but a clean checkout (CI) has none, and then these ran last, alone, for the suite's last 50 s.
 */
const longFiles = ["test/e2e/rates-live-feed-faults.test.ts", "test/e2e/rates-month.test.ts", "test/e2e/rates-live-landing.test.ts"]
class LongFilesFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>) {
    const long = (spec: TestSpecification) => longFiles.some((file) => spec.moduleId.endsWith(file))
    const sorted = await super.sort(files)
    return [...sorted.filter(long), ...sorted.filter((spec) => !long(spec))]
  }
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores, but most integration files wait (on servers, emulators, timers): with 2 workers the cores were 64 %
    // busy (npm test 411 s), with 4 about 88 % (335 s), every test passing under that load.
    maxWorkers: 4,
    sequence: { sequencer: LongFilesFirst },
    // The JSON report is what .ci/run summarises into its closing "N passed, N failed" line.
    reporters: ["default", "json"],
    outputFile: { json: "test-results/vitest.json" },
    projects: [
      // One module graph per worker, not per file: Effect's modules are loaded once, not 60 times.
      { extends: true, test: { name: "unit", include: [...unitFolders, "test/smoke.test.ts"], exclude: integrationToo, isolate: false } },
      {
        extends: true,
        test: {
          name: "integration",
          include: [...["e2e", "fuzz", "scale", "production", "package", "cli", "startup", "architecture"].map((f) => `test/${f}/**/*.test.ts`), ...integrationToo]
        }
      }
    ]
  }
})
