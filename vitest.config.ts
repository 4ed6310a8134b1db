import { join } from "node:path"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

// Node's compile cache for every process the tests start (test/support/spawn.ts `childEnv`): the service and the CLIs
// load their modules in about half the time (0.8 s → 0.4 s of CPU for the clients CLI).
process.env.NODE_COMPILE_CACHE ??= join(process.cwd(), "node_modules/.cache/node-compile-cache")

/**
 * A test file's project is its folder under test/, by what it costs to run (docs/testing.md); all three run in `npm test`:
 * - `unit` (test/unit/): in this process, with in-memory fakes and in-process emulators; no Redis, no PostgreSQL, no
 *   process started, no wait of seconds on purpose. The inner loop: `npm run test:unit`.
 * - `stores` (test/stores/): in this process, against the machine's Redis (REDIS_URL) and PostgreSQL (DATABASE_URL).
 * - `integration` (test/integration/): starts processes (the service, the CLIs, redis-server, PostgreSQL, Chromium,
 *   npm), waits on real time (timeouts, breakers, slow peers) or runs long scenarios.
 */
const tier = (folder: string) => `test/${folder}/**/*.test.ts`

/**
 * The files that take a minute or more (long scenarios on real time) start first: vitest orders files by the times of
 * its last run, but a clean checkout (CI) has none, and then these ran last, alone, for the suite's last 50 s.
 */
const longFiles = ["rates-live-feed-faults.test.ts", "rates-month.test.ts", "rates-live-landing.test.ts"].map((file) => `test/integration/e2e/${file}`)
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
      // One module graph per worker, not per file: Effect's modules are loaded once, not once a file.
      { extends: true, test: { name: "unit", include: [tier("unit")], isolate: false } },
      { extends: true, test: { name: "stores", include: [tier("stores")], isolate: false } },
      { extends: true, test: { name: "integration", include: [tier("integration")] } }
    ]
  }
})
