/**
 * The three linters over a served OpenAPI document, as an operator would run them:
 *
 *   node test/support/lintServed.ts http://127.0.0.1:3000/openapi.json
 *
 * prints, per ruleset, the errors and warnings and their count by rule (test/support/openapiLint.ts).
 */
import { redoclyRecommended, spectralOas, spectralOwasp, tally } from "./openapiLint.ts"

const url = process.argv[2]
if (url === undefined) {
  process.stderr.write("usage: node test/support/lintServed.ts URL-OF-openapi.json\n")
  process.exit(2)
}
const document = await (await fetch(url)).json()
for (const [name, lint] of [["Redocly recommended", redoclyRecommended], ["Spectral spectral:oas", spectralOas], ["Spectral OWASP", spectralOwasp]] as const) {
  const findings = await lint(document)
  const errors = findings.filter((f) => f.severity === "error").length
  const warnings = findings.filter((f) => f.severity === "warning").length
  process.stdout.write(`${name}: ${errors} errors, ${warnings} warnings ${JSON.stringify(tally(findings))}\n`)
}
