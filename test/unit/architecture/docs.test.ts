/**
 * The repository explains itself: README.md stays short and links every document in docs/; every relative link in
 * README.md and docs/ reaches a file (and a heading, when it names one), and every path they name exists; every
 * decision, specification section and provider section the code cites has its section in docs/; and no file
 * names a path outside the repository.
 * Files only, no process: the repository as a reader finds it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const README_MAX_LINES = 200

const read = (path: string) => readFileSync(join(ROOT, path), "utf8")
const isFile = (path: string) => statSync(path, { throwIfNoEntry: false })?.isFile() === true
const exists = (path: string) => statSync(path, { throwIfNoEntry: false }) !== undefined

/** What .gitignore leaves out, for its simple entries (`name`, `name/`, `*.ext`), and .git itself. */
const ignoredBy = (gitignore: string): (name: string) => boolean => {
  const entries = gitignore.split("\n").map((line) => line.trim()).filter((line) => line !== "" && !line.startsWith("#"))
  const names = new Set([".git", ...entries.filter((e) => !e.includes("*")).map((e) => e.replace(/^\/|\/$/g, ""))])
  const suffixes = entries.filter((e) => /^\*[^*/]+$/.test(e)).map((e) => e.slice(1))
  return (name) => names.has(name) || suffixes.some((suffix) => name.endsWith(suffix))
}
const ignored = ignoredBy(read(".gitignore"))

/** Every file of the repository a clone would hold (relative paths, `/`-separated). */
const repositoryFiles = (dir = ""): Array<string> =>
  readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    if (ignored(entry.name)) return []
    const path = dir === "" ? entry.name : `${dir}/${entry.name}`
    return entry.isDirectory() ? repositoryFiles(path) : entry.isFile() ? [path] : []
  })

const sourceFiles = (dir: string) => repositoryFiles(dir).filter((path) => path.endsWith(".ts"))
const documents = ["README.md", ...repositoryFiles("docs").filter((path) => path.endsWith(".md"))]

/** Markdown without its code (fenced blocks and inline spans), where links and headings are read. */
const prose = (markdown: string) => markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/`[^`\n]*`/g, "")

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2, ... */
const anchorsOf = (markdown: string): Set<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const match of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = match[1]!.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-")
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

/** The relative links of a Markdown file: `[text](target)` outside code, without a scheme. */
const relativeLinks = (markdown: string): Array<string> =>
  [...prose(markdown).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((match) => match[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))

/** Where a link leads, or why it leads nowhere. */
const brokenLink = (from: string, target: string): string | undefined => {
  const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined]
  const path = pathPart === "" ? join(ROOT, from) : resolve(ROOT, dirname(from), decodeURIComponent(pathPart))
  const inRepository = relative(ROOT, path)
  if (inRepository.startsWith("..") || inRepository.split(sep)[0] === "node_modules") return "outside the repository"
  if (!exists(path)) return "no such file"
  if (anchor === undefined || !isFile(path) || !path.endsWith(".md")) return undefined
  return anchorsOf(readFileSync(path, "utf8")).has(anchor.toLowerCase()) ? undefined : `no heading #${anchor}`
}

/** `## C4. Exchange rates` → 4, with the titles of its `###` parts. */
const decisionSections = (markdown: string): Map<number, Array<string>> => {
  const sections = new Map<number, Array<string>>()
  let current: Array<string> | undefined
  for (const line of prose(markdown).split("\n")) {
    const section = /^## C(\d+)\.\s/.exec(line)
    if (section !== null) sections.set(Number(section[1]), current = [])
    else if (line.startsWith("## ")) current = undefined
    else if (line.startsWith("### ") && current !== undefined) current.push(line.slice(4).trim())
  }
  return sections
}

/** `## §4 Endpoints` → 4. */
const numberedSections = (markdown: string): Set<number> =>
  new Set([...prose(markdown).matchAll(/^## §(\d+)\s/gm)].map((match) => Number(match[1])))

/** Each citation in the code, with the file and line it is in. */
interface Citation {
  readonly where: string
  readonly number: number
  readonly title?: string | undefined
}
const citationsIn = (files: ReadonlyArray<string>, pattern: RegExp, numbersOf: (match: RegExpExecArray) => Array<Omit<Citation, "where">>) =>
  files.flatMap((file) =>
    read(file).split("\n").flatMap((line, i) =>
      [...line.matchAll(pattern)].flatMap((match) => numbersOf(match).map((cited) => ({ where: `${file}:${i + 1}`, ...cited })))
    )
  )
const sectionNumbers = (list: string) => [...list.matchAll(/§(\d+)/g)].map((m) => ({ number: Number(m[1]) }))

const code = [...sourceFiles("src"), ...sourceFiles("test")]

describe("the repository's documents", () => {
  it(`keeps README.md to ${README_MAX_LINES} lines`, () => {
    const lines = read("README.md").split("\n").length - (read("README.md").endsWith("\n") ? 1 : 0)
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES)
  })

  it("links every document of docs/ from README.md", () => {
    const linked = new Set(relativeLinks(read("README.md")).map((target) => target.split("#")[0]))
    expect(documents.filter((doc) => doc !== "README.md" && !linked.has(doc))).toEqual([])
  })

  it("has every relative link of README.md and docs/ lead to a file of the repository, and to its heading", () => {
    const broken = documents.flatMap((doc) =>
      relativeLinks(read(doc)).flatMap((target) => {
        const why = brokenLink(doc, target)
        return why === undefined ? [] : [`${doc} → ${target}: ${why}`]
      })
    )
    expect(broken).toEqual([])
  })

  it("names in code spans only paths of the repository that exist (`src/...`, `test/...`)", () => {
    const fenced = /^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm
    const missing = documents.flatMap((doc) =>
      [...read(doc).replace(fenced, "").matchAll(/`((?:src|test|docs|\.ci)\/[\w./-]+)`/g)]
        .map((match) => match[1]!)
        .filter((path) => !exists(join(ROOT, path)))
        .map((path) => `${doc}: ${path}`)
    )
    expect(missing).toEqual([])
  })

  it("has a section of docs/decisions.md for every decision the code cites (C4, CONTRACT C4, C4 \"Live quotes\")", () => {
    const sections = decisionSections(read("docs/decisions.md"))
    // A number, and the title of a part in quotes when one follows it; not a percent-encoded byte such as %C0.
    const cited = citationsIn(code, /(?<![%\w])C(\d+)\b(?:,? "([^"]+)")?/g, (m) => [{ number: Number(m[1]), title: m[2] }])
    expect(cited.length).toBeGreaterThan(100)
    const unresolved = cited.filter(({ number, title }) => {
      const parts = sections.get(number)
      return parts === undefined || (title !== undefined && !parts.some((part) => part.startsWith(title)))
    })
    expect(unresolved.map(({ where, number, title }) => `${where}: C${number}${title === undefined ? "" : ` "${title}"`}`)).toEqual([])
  })

  it("has a section of docs/specification.md for every \"spec §N\" and of docs/upstreams.md for every \"docs/upstreams.md §N\"", () => {
    const specification = numberedSections(read("docs/specification.md"))
    const upstreams = numberedSections(read("docs/upstreams.md"))
    expect([...specification].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
    const unresolved = [
      ...citationsIn(code, /\bspec §\d+(?:(?:, | and )§\d+)*/g, (m) => sectionNumbers(m[0]))
        .filter(({ number }) => !specification.has(number)).map(({ where, number }) => `${where}: spec §${number}`),
      ...citationsIn(code, /\bdocs\/upstreams\.md §\d+(?:(?:, | and | to )§\d+)*/g, (m) => sectionNumbers(m[0]))
        .filter(({ number }) => !upstreams.has(number)).map(({ where, number }) => `${where}: docs/upstreams.md §${number}`)
    ]
    expect(unresolved).toEqual([])
  })

  it("names no path outside the repository in any of its files", () => {
    // Spelled in parts, so that this file does not name them itself.
    const outside = [["..", "shared"].join("/"), ["CONTRACT", "md"].join("."), ["", "work", ""].join("/")]
    const naming = repositoryFiles().filter((file) => {
      const text = readFileSync(join(ROOT, file))
      return !text.includes(0) && outside.some((path) => text.includes(path))
    })
    expect(naming).toEqual([])
  })
})
