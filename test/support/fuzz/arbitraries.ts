/**
 * fast-check arbitraries derived from the OpenAPI document's JSON Schemas, and the odd inputs the
 * document cannot describe (Unicode edge cases, huge and deep JSON, duplicate keys, raw bytes).
 *
 * `validFrom` generates values the schema accepts; `nearValidFrom` generates values that break one
 * constraint (a missing required member, one wrong type, one bound or pattern crossed, one unknown
 * member where none is allowed). Neither is the oracle: the tests ask Ajv and the HttpApi schema
 * whether a value is valid, so a generator mistake cannot hide a server mistake.
 */
import fc from "fast-check"
import type { OpenApiModel } from "./openapi.ts"

type Schema = Record<string, any>
export type Hints = Readonly<Record<string, fc.Arbitrary<unknown>>>

/** `allOf` folded into its parent (enough for what Effect's generator emits). */
const flatten = (model: OpenApiModel, schema: Schema): Schema => {
  const s = model.deref(schema)
  if (!Array.isArray(s.allOf)) return s
  let merged: Schema = { ...s }
  delete merged.allOf
  for (const part of s.allOf) {
    const p = flatten(model, part)
    merged = {
      ...merged,
      ...p,
      properties: { ...merged.properties, ...p.properties },
      required: [...(merged.required ?? []), ...(p.required ?? [])]
    }
    // An allOf member `{ type: object, additionalProperties: {} }` only re-allows extra members.
    if (s.additionalProperties === undefined) merged.additionalProperties = p.additionalProperties
  }
  if (merged.properties && Object.keys(merged.properties).length === 0 && !s.properties) delete merged.properties
  return merged
}

const typeOf = (s: Schema): string | undefined =>
  typeof s.type === "string" ? s.type : s.enum !== undefined ? typeof s.enum[0] : s.properties ? "object" : undefined

/** A JSON member name that is not one of `taken`. */
const freshKey = (taken: ReadonlyArray<string>) =>
  fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.constantFrom("extra", "__proto__", "constructor", "toString", "0", ""))
    .filter((k) => !taken.includes(k))

const jsonLeaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 20 })
)
export const anyJson = fc.jsonValue({ maxDepth: 3 })

/** Values the schema accepts (bounded in size so a run stays fast). */
export const validFrom = (model: OpenApiModel, schema: Schema, hints: Hints = {}, pointer = ""): fc.Arbitrary<unknown> => {
  const s = flatten(model, schema)
  const generic = validGeneric(model, s, hints, pointer)
  const hint = hints[pointer]
  return hint === undefined ? generic : fc.oneof({ arbitrary: hint, weight: 3 }, { arbitrary: generic, weight: 1 })
}

const validGeneric = (model: OpenApiModel, s: Schema, hints: Hints, pointer: string): fc.Arbitrary<unknown> => {
  if (s.const !== undefined) return fc.constant(s.const)
  if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum)
  if (Array.isArray(s.anyOf)) return fc.oneof(...s.anyOf.map((x: Schema) => validFrom(model, x, hints, pointer)))
  switch (typeOf(s)) {
    case "string": {
      const minLength = s.minLength ?? 0
      const maxLength = Math.min(s.maxLength ?? 40, 80)
      if (s.format === "email") return fc.emailAddress().filter((e) => e.length <= (s.maxLength ?? 254))
      if (typeof s.pattern === "string") {
        const re = new RegExp(s.pattern, "u")
        return fc.stringMatching(re).filter((x) => x.length >= minLength && x.length <= (s.maxLength ?? Infinity) && x.length <= 80)
      }
      return fc.string({ minLength, maxLength, unit: "grapheme" })
    }
    case "integer":
      return fc.integer({ min: s.minimum ?? -1_000_000, max: s.maximum ?? 1_000_000 })
    case "number":
      return fc.double({ min: s.minimum ?? -1e9, max: s.maximum ?? 1e9, noNaN: true, noDefaultInfinity: true })
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array": {
      const minLength = s.minItems ?? 0
      const cap = s.maxItems ?? 8
      const item = validFrom(model, s.items ?? {}, hints, `${pointer}/*`)
      const small = fc.array(item, { minLength, maxLength: Math.min(cap, Math.max(minLength, 6)) })
      // Now and then exactly at the upper bound, where off-by-one mistakes live.
      return s.maxItems === undefined ? small : fc.oneof({ arbitrary: small, weight: 9 }, { arbitrary: fc.array(item, { minLength: cap, maxLength: cap }), weight: 1 })
    }
    case "object": {
      const properties: Record<string, Schema> = s.properties ?? {}
      const required: ReadonlyArray<string> = s.required ?? []
      const members = Object.fromEntries(
        Object.entries(properties).map(([name, p]) => [name, validFrom(model, p, hints, `${pointer}/${name}`)])
      )
      const record = fc.record(members, { requiredKeys: required.filter((r) => r in properties) as Array<never> })
      if (s.additionalProperties === false) return record
      const extras = fc.dictionary(freshKey(Object.keys(properties)), anyJson, { maxKeys: 3 })
      return fc.tuple(record, extras).map(([r, e]) => ({ ...e, ...r }))
    }
    default:
      return anyJson
  }
}

/** A JSON value whose type differs from the schema's. */
const wrongTypeFor = (s: Schema): fc.Arbitrary<unknown> => {
  const type = typeOf(s)
  const candidates: Array<[string, fc.Arbitrary<unknown>]> = [
    ["null", fc.constant(null)],
    ["boolean", fc.boolean()],
    ["integer", fc.integer()],
    ["number", fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Number.isInteger(x))],
    ["string", fc.string({ maxLength: 10 })],
    ["array", fc.array(jsonLeaf, { maxLength: 3 })],
    ["object", fc.dictionary(fc.string({ maxLength: 5 }), jsonLeaf, { maxKeys: 3 })]
  ]
  const excluded = type === "number" ? ["number", "integer"] : type === undefined ? [] : [type]
  return fc.oneof(...candidates.filter(([t]) => !excluded.includes(t)).map(([, a]) => a))
}

/** Values that break exactly one constraint of the schema (undefined: the schema accepts anything). */
export const nearValidFrom = (model: OpenApiModel, schema: Schema, hints: Hints = {}, pointer = ""): fc.Arbitrary<unknown> | undefined => {
  const s = flatten(model, schema)
  const options: Array<fc.Arbitrary<unknown>> = []
  const type = typeOf(s)
  if (type !== undefined && !Array.isArray(s.anyOf)) options.push(wrongTypeFor(s))
  if (Array.isArray(s.enum)) {
    options.push(fc.string({ maxLength: 8 }).filter((x) => !s.enum.includes(x)))
    options.push(fc.constantFrom(...s.enum.filter((e: unknown) => typeof e === "string").map((e: string) => e.toUpperCase())).filter((x) => !s.enum.includes(x)))
  }
  switch (type) {
    case "string":
      if ((s.minLength ?? 0) > 0) options.push(fc.constant(""))
      if (s.maxLength !== undefined) options.push(fc.constant("a".repeat(s.maxLength + 1)))
      if (typeof s.pattern === "string") {
        const re = new RegExp(s.pattern, "u")
        options.push(fc.oneof(fc.string({ minLength: 1, maxLength: 12, unit: "binary" }), oddUnicode).filter((x) => !re.test(x)))
      }
      break
    case "integer":
      if (s.minimum !== undefined) options.push(fc.integer({ min: s.minimum - 1000, max: s.minimum - 1 }))
      if (s.maximum !== undefined) options.push(fc.integer({ min: s.maximum + 1, max: s.maximum + 1000 }))
      options.push(fc.constantFrom(1.5, -0.25))
      break
    case "array": {
      if ((s.minItems ?? 0) > 0) options.push(fc.constant([]))
      const item = validFrom(model, s.items ?? {}, hints, `${pointer}/*`)
      if (s.maxItems !== undefined) options.push(fc.array(item, { minLength: s.maxItems + 1, maxLength: s.maxItems + 3 }))
      const badItem = nearValidFrom(model, s.items ?? {}, hints, `${pointer}/*`)
      if (badItem !== undefined) {
        options.push(
          fc.tuple(fc.array(item, { maxLength: 3 }), badItem, fc.array(item, { maxLength: 3 })).map(([a, bad, b]) => [...a, bad, ...b])
        )
      }
      break
    }
    case "object": {
      const properties: Record<string, Schema> = s.properties ?? {}
      const required: ReadonlyArray<string> = s.required ?? []
      const valid = validFrom(model, s, hints, pointer) as fc.Arbitrary<Record<string, unknown>>
      for (const name of required) {
        options.push(valid.map((v) => {
          const { [name]: _dropped, ...rest } = v
          return rest
        }))
      }
      for (const [name, p] of Object.entries(properties)) {
        const bad = nearValidFrom(model, p, hints, `${pointer}/${name}`)
        if (bad !== undefined) options.push(fc.tuple(valid, bad).map(([v, b]) => ({ ...v, [name]: b })))
      }
      if (s.additionalProperties === false) {
        options.push(fc.tuple(valid, freshKey(Object.keys(properties)), jsonLeaf).map(([v, k, x]) => ({ ...v, [k]: x })))
      }
      break
    }
  }
  return options.length === 0 ? undefined : fc.oneof(...options)
}

// ---- odd inputs --------------------------------------------------------------------------------

/** Strings that trip naive Unicode handling. */
export const oddUnicode: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "\uD800", // lone high surrogate
    "\uDFFF", // lone low surrogate
    "\uDC00\uD800", // reversed pair
    "\u0000", // NUL
    "\u202E", // right-to-left override
    "\u200F\u05D0\u05D1", // RTL mark + Hebrew
    "\u0627\u0644\u0639\u0631\u0628\u064A\u0629", // Arabic
    "\uFEFF", // BOM / zero-width no-break space
    "\u200B", // zero-width space
    "\u{1F600}", // emoji
    "\u{1F468}\u200D\u{1F469}\u200D\u{1F467}", // ZWJ family
    "\u{1F1FA}\u{1F1F8}", // flag
    "e\u0301", // combining accent
    "\uFFFF", // non-character
    "\u2028\u2029", // line / paragraph separators
    "\u00A0", // no-break space
    "\u0130", // dotted capital I (case folding)
    "\u212A", // Kelvin sign (case-folds to k)
    "\uFF21", // fullwidth A
    "\u0085" // NEL
  ),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.string({ unit: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 3 })
)

/**
 * JSON text with `members` serialised in order, keys allowed to repeat (JSON.stringify cannot
 * produce duplicates; RFC 8259 leaves their meaning open, JSON.parse keeps the last).
 */
export const objectText = (members: ReadonlyArray<readonly [string, unknown]>) =>
  `{${members.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? "null"}`).join(",")}}`

/** JSON nested `depth` levels deep (arrays or objects) around a leaf. */
export const nestedJson = (depth: number, kind: "array" | "object", leaf = "0") =>
  kind === "array" ? "[".repeat(depth) + leaf + "]".repeat(depth) : '{"a":'.repeat(depth) + leaf + "}".repeat(depth)

/** An arbitrary that sometimes returns the value, sometimes the value with odd Unicode in one string. */
export const sprinkleUnicode = (value: unknown): fc.Arbitrary<unknown> => {
  const strings: Array<Array<string | number>> = []
  const walk = (x: unknown, path: Array<string | number>) => {
    if (typeof x === "string") strings.push(path)
    else if (Array.isArray(x)) x.forEach((item, i) => walk(item, [...path, i]))
    else if (typeof x === "object" && x !== null) for (const [k, item] of Object.entries(x)) walk(item, [...path, k])
  }
  walk(value, [])
  if (strings.length === 0) return fc.constant(value)
  const insert = (base: string, odd: string, at: number) => {
    const i = at % (base.length + 1)
    return base.slice(0, i) + odd + base.slice(i)
  }
  return fc.tuple(fc.constantFrom(...strings), oddUnicode, fc.nat()).map(([path, odd, at]) => {
    if (path.length === 0) return insert(value as string, odd, at)
    const copy = structuredClone(value) as any
    let parent = copy
    for (const key of path.slice(0, -1)) parent = parent[key]
    const last = path.at(-1)!
    parent[last] = insert(parent[last] as string, odd, at)
    return copy
  })
}
