/**
 * Request-decoding failures as problems: malformed JSON → 400 malformed_json, a body that does not
 * match the schema → 400 validation_failed with JSON Pointers.
 */
import { Effect, Layer, SchemaIssue } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import type { HttpApiSchemaError } from "effect/http-api/HttpApiError"
import { BodyProblems } from "../api/Api.ts"
import type { ProblemFieldError } from "../api/problems.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { problemResponse } from "./problemResponse.ts"
import { CurrentRequestId } from "./requestId.ts"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** RFC 6901: `~` → `~0`, `/` → `~1`. */
const jsonPointer = (path: ReadonlyArray<PropertyKey>) =>
  path.map((segment) => "/" + String(segment).replaceAll("~", "~0").replaceAll("/", "~1")).join("")

const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)

/**
 * One entry per failed member, in the order the schema met them (stable for a given body); a member
 * that failed several checks (`""`: too short and not a symbol) gets them joined in one detail.
 */
const fieldErrorsOf = (issue: SchemaIssue.Issue): Array<ProblemFieldError> => {
  const byPointer = new Map<string, Array<string>>()
  for (const i of formatIssues(issue).issues) {
    const pointer = jsonPointer((i.path ?? []).map((s) => (typeof s === "object" && s !== null ? s.key : s)))
    const details = byPointer.get(pointer)
    if (details !== undefined) details.push(i.message)
    else if (byPointer.size < 20) byPointer.set(pointer, [i.message])
  }
  return [...byPointer].map(([pointer, details]) => ({ pointer, detail: clip(details.join("; ")) }))
}

// HttpApi reports an unparsable JSON body as this single root issue.
const isUnparsableJson = (issue: SchemaIssue.Issue) =>
  issue._tag === "InvalidValue" && issue.annotations?.message === "Expected a valid JSON body"

/**
 * The members of a validation_failed problem for a body that does not match its schema: the one
 * rendering of the HttpApi's (below) and the edge's (edge.ts), so both write the same bytes.
 */
export const validationFailure = (issue: SchemaIssue.Issue) => {
  const errors = fieldErrorsOf(issue)
  const first = errors[0]
  return {
    detail: first === undefined
      ? "The request does not match the schema."
      : `${first.pointer === "" ? "The body" : first.pointer}: ${first.detail}`,
    errors
  }
}

/**
 * Renders the problem at once, complete (absolute `type`, `instance`): 400s are the commonest errors,
 * and this skips encoding the class through its schema and the edge's re-reading of the body.
 */
const toRequestProblem = (error: HttpApiSchemaError, baseUrl: string) =>
  Effect.gen(function*() {
    // A response that fails its own schema is our bug: a defect, which the edge logs and answers 500.
    if (error.kind === "Body" || error.kind === "ResponseHeaders") return yield* Effect.die(error)
    const ctx = { baseUrl, requestId: yield* CurrentRequestId }
    const issue = error.cause.issue
    if (isUnparsableJson(issue)) return problemResponse("malformed_json", ctx)
    return problemResponse("validation_failed", ctx, validationFailure(issue))
  })

export const BodyProblemsLive = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    HttpApiMiddleware.layerSchemaErrorTransform(BodyProblems, (error) => toRequestProblem(error, config.publicBaseUrl)))
)
