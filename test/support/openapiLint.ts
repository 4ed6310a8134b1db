/**
 * Standard OpenAPI linters, run programmatically over a document: Redocly's `recommended` rules, Spectral's
 * `spectral:oas` and Spectral's OWASP API Security ruleset. Each finding is one line `severity rule path`.
 */
import { createConfig, lintFromString } from "@redocly/openapi-core"
import { Document, Spectral } from "@stoplight/spectral-core"
// CommonJS without named exports Node can detect: the namespace is its default.
import parsers from "@stoplight/spectral-parsers"
import { oas } from "@stoplight/spectral-rulesets"
import owasp from "@stoplight/spectral-owasp-ruleset"

export interface Finding {
  readonly severity: "error" | "warning" | "info" | "hint"
  readonly rule: string
  readonly path: string
  readonly message: string
}

const spectralSeverity = ["error", "warning", "info", "hint"] as const

export const redoclyRecommended = async (document: unknown): Promise<ReadonlyArray<Finding>> => {
  const config = await createConfig({ extends: ["recommended"] })
  const problems = await lintFromString({ source: JSON.stringify(document), absoluteRef: "openapi.json", config })
  return problems.filter((p) => !p.ignored).map((p) => ({
    severity: p.severity === "error" ? "error" : "warning",
    rule: p.ruleId,
    path: p.location[0]?.pointer ?? "",
    message: p.message
  }))
}

const spectral = async (ruleset: unknown, document: unknown): Promise<ReadonlyArray<Finding>> => {
  const linter = new Spectral()
  linter.setRuleset({ extends: [ruleset as never] } as never)
  const results = await linter.run(new Document(JSON.stringify(document), parsers.Json, "openapi.json"))
  return results.map((r) => ({
    severity: spectralSeverity[r.severity] ?? "hint",
    rule: String(r.code),
    path: `#/${r.path.map((s) => String(s).replaceAll("~", "~0").replaceAll("/", "~1")).join("/")}`,
    message: r.message
  }))
}

export const spectralOas = (document: unknown) => spectral(oas, document)
export const spectralOwasp = (document: unknown) => spectral(owasp, document)

/** `{ "error rule": count }`, the way a linter's summary reads. */
export const tally = (findings: ReadonlyArray<Finding>): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const f of findings) counts[`${f.severity} ${f.rule}`] = (counts[`${f.severity} ${f.rule}`] ?? 0) + 1
  return counts
}
