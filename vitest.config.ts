import { defineConfig } from "vitest/config"

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

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: integration suites start servers and emulators; keep the pool small.
    maxWorkers: 2,
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
