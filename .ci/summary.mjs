// Prints the closing line CI reads, from vitest's JSON report: "N passed, N failed[, N skipped]".
import { readFileSync } from "node:fs"

const file = process.argv[2] ?? "test-results/vitest.json"
let report
try {
  report = JSON.parse(readFileSync(file, "utf8"))
} catch (error) {
  console.log(`no test report at ${file}: ${error.message}`)
  console.log("0 passed, 1 failed")
  process.exit(1)
}
const passed = report.numPassedTests ?? 0
// A file that fails to load has no failed test of its own: count it, so it cannot pass silently. (vitest's
// numFailedTestSuites counts describe blocks too, so a failed test inside one was counted twice or more.)
const failed = (report.numFailedTests ?? 0) + filesFailedWithoutFailedTests(report)
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`)
process.exit(failed > 0 || passed === 0 ? 1 : 0)

function filesFailedWithoutFailedTests(r) {
  return (r.testResults ?? []).filter(
    (s) => s.status === "failed" && !(s.assertionResults ?? []).some((a) => a.status === "failed")
  ).length
}
