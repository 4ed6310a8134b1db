/**
 * The shape of src/'s import graph, as the rules of dependency-cruiser.cjs state it: no import circle,
 * no import from a lower layer up to a higher one, no capability importing another, and no cycle
 * between the top-level folders and files of src; and nothing left unused (knip.json: no file, no
 * export, no exported type in src that nobody imports, tests included).
 */
import { spawnSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { cruise, type ICruiseOptions, type ICruiseResult } from "dependency-cruiser"
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options"
import { beforeAll, describe, expect, it } from "vitest"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(`${dir}/${entry.name}`) : entry.name.endsWith(".ts") ? [`${dir}/${entry.name}`] : []
  )

/** The files the configuration leaves out of the cruise (its `exclude` option), as one pattern. */
const excludedBy = (exclude: ICruiseOptions["exclude"]): RegExp => {
  const paths = [typeof exclude === "string" || Array.isArray(exclude) ? exclude : exclude?.path ?? []].flat()
  return new RegExp(paths.length === 0 ? "(?!)" : paths.join("|"))
}

/** The unit of a module for folder-level cycles: its top-level folder under src/, or the top-level file. */
const unitOf = (path: string): string | undefined => /^src\/([^/]+\/|[^/]+$)/.exec(path)?.[1]

/** Strongly connected sets of more than one unit (Tarjan): each holds at least one cycle. */
const cyclesOf = (edges: ReadonlyMap<string, ReadonlySet<string>>): Array<Array<string>> => {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const found: Array<Array<string>> = []
  const visit = (v: string) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: Array<string> = []
    let w: string
    do {
      w = stack.pop()!
      component.push(w)
    } while (w !== v)
    if (component.length > 1) found.push(component.sort())
  }
  for (const v of edges.keys()) if (!index.has(v)) visit(v)
  return found
}

describe("the import graph of src (dependency-cruiser, dependency-cruiser.cjs)", () => {
  let options: ICruiseOptions
  let result: ICruiseResult
  beforeAll(async () => {
    options = await extractDepcruiseOptions(join(ROOT, "test/integration/architecture/dependency-cruiser.cjs"))
    const cruised = await cruise(["src"], { ...options, baseDir: ROOT, outputType: "json" })
    result = (typeof cruised.output === "string" ? JSON.parse(cruised.output) : cruised.output) as ICruiseResult
  }, 60_000)

  it("reads every module of src (a parser that skipped some would pass for nothing)", () => {
    const cruised = new Set(result.modules.map((m) => m.source))
    const excluded = excludedBy(options.exclude)
    expect(sourceFiles("src").filter((file) => !cruised.has(file) && !excluded.test(file))).toEqual([])
  })

  it("breaks no rule: no circle, no upward import, no capability importing another", () => {
    const violations = result.summary.violations.map((v) =>
      `${v.from} → ${v.to} (${v.rule.name})${v.cycle === undefined ? "" : `: ${v.cycle.map((s) => s.name).join(" → ")}`}`
    )
    expect(violations).toEqual([])
  })

  it("has no cycle between the top-level folders and files of src", () => {
    const edges = new Map<string, Set<string>>()
    for (const module of result.modules) {
      const from = unitOf(module.source)
      if (from === undefined) continue
      for (const dependency of module.dependencies) {
        const to = unitOf(dependency.resolved)
        if (to === undefined || to === from) continue
        edges.set(from, (edges.get(from) ?? new Set()).add(to))
      }
    }
    expect(cyclesOf(edges)).toEqual([])
  })
})

interface Finding {
  readonly name: string
  readonly line?: number
}

describe("nothing unused in src (knip, knip.json)", () => {
  it("has no unused file, export or exported type", () => {
    const args = ["--config", "test/integration/architecture/knip.json", "--reporter", "json", "--no-progress", "--no-config-hints"]
    const knip = spawnSync(process.execPath, [join(ROOT, "node_modules/knip/bin/knip.js"), ...args], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 120_000
    })
    expect(knip.error, knip.stderr).toBeUndefined()
    // Its JSON report, whatever the exit code (1 when it found anything, in or out of src).
    expect(knip.stdout, knip.stderr).toMatch(/^\{/)
    const report = JSON.parse(knip.stdout) as {
      readonly issues: ReadonlyArray<{ readonly file: string } & Record<string, unknown>>
    }
    const kinds = ["files", "exports", "types", "nsExports", "nsTypes", "enumMembers", "duplicates"]
    const unused = report.issues.filter((issue) => issue.file.startsWith("src/")).flatMap((issue) =>
      kinds.flatMap((kind) => {
        // One entry per finding; a duplicate is the list of the names exported twice.
        const found = (issue[kind] ?? []) as ReadonlyArray<Finding | ReadonlyArray<Finding>>
        return found.map((item) => {
          const all: ReadonlyArray<Finding> = Array.isArray(item) ? item : [item as Finding]
          const line = all[0]?.line === undefined ? "" : `:${all[0].line}`
          return `${issue.file}${line}: ${kind} ${all.map((i) => i.name).join(" = ")}`
        })
      })
    )
    expect(unused).toEqual([])
  }, 130_000)
})
