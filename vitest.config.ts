import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: integration suites start servers and emulators; keep the pool small.
    maxWorkers: 2,
    // The JSON report is what .ci/run summarises into its closing "N passed, N failed" line.
    reporters: ["default", "json"],
    outputFile: { json: "test-results/vitest.json" }
  }
})
