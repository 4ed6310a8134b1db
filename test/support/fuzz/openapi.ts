/**
 * The served OpenAPI document as a test oracle: which statuses each operation declares, which media
 * type each declares, and Ajv (JSON Schema 2020-12, the dialect of OpenAPI 3.1) validators for every
 * request and response schema in it.
 *
 * Ajv comes with @seriousme/openapi-schema-validator (a dev dependency), so no package is added.
 */
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"

// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the module object.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv2020
) => Ajv2020

export interface OperationModel {
  readonly operationId: string
  readonly method: string
  /** The OpenAPI path template, e.g. /api/v1/exchange-rates. */
  readonly path: string
  readonly statuses: ReadonlySet<number>
  /** Media type declared for a status (the first one), e.g. application/problem+json. */
  readonly mediaType: (status: number) => string | undefined
  /** Validates a response body for a declared status; undefined when nothing is declared. */
  readonly validateResponse: (status: number, body: unknown) => ReadonlyArray<string> | undefined
  /** Validates a request body against the declared request schema (formats off: see `requestAjv`). */
  readonly validateRequest: ((body: unknown) => ReadonlyArray<string>) | undefined
  readonly requestSchema: unknown
  readonly requestMediaType: string | undefined
}

export interface OpenApiModel {
  readonly doc: any
  readonly operations: ReadonlyArray<OperationModel>
  readonly byId: (operationId: string) => OperationModel
  /** The operation for a concrete method and path, or undefined. */
  readonly find: (method: string, path: string) => OperationModel | undefined
  /** Methods declared on a path template (upper case). */
  readonly methodsOf: (path: string) => ReadonlyArray<string>
  /** Resolves `#/components/...` references. */
  readonly deref: (schema: any) => any
}

const DOC_ID = "urn:fuzz:openapi"
const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

const pointerEscape = (segment: string) => segment.replaceAll("~", "~0").replaceAll("/", "~1")

const newAjv = (validateFormats: boolean) => {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats })
  // OpenAPI 3.1's dialect adds these annotation keywords to JSON Schema.
  ajv.addVocabulary(["example", "discriminator", "xml", "externalDocs"])
  if (validateFormats) addFormats(ajv)
  return ajv
}

const messages = (validate: ValidateFunction) =>
  (validate.errors ?? []).map((e) => `${e.instancePath || "(root)"} ${e.message ?? e.keyword}`)

export const loadOpenApi = (doc: any): OpenApiModel => {
  // Responses: formats on (date-time, uri-reference are what the document promises).
  const responseAjv = newAjv(true)
  responseAjv.addSchema({ ...doc, $id: DOC_ID })
  // Requests: formats off. The server's e-mail rule (validator's isEmail, "practical address") is
  // deliberately stricter than JSON Schema's `email`; that difference is asserted separately.
  const requestAjv = newAjv(false)
  requestAjv.addSchema({ ...doc, $id: DOC_ID })

  const compile = (ajv: Ajv2020, pointer: string) => ajv.getSchema(`${DOC_ID}#${pointer}`) ?? ajv.compile({ $ref: `${DOC_ID}#${pointer}` })

  const operations: Array<OperationModel> = []
  for (const [path, item] of Object.entries<any>(doc.paths ?? {})) {
    for (const method of methods) {
      const op = item[method]
      if (op === undefined) continue
      const base = `/paths/${pointerEscape(path)}/${method}`
      const responses = op.responses ?? {}
      const validators = new Map<number, ValidateFunction>()
      for (const [status, response] of Object.entries<any>(responses)) {
        const mediaType = Object.keys(response.content ?? {})[0]
        if (mediaType === undefined) continue
        validators.set(
          Number(status),
          compile(responseAjv, `${base}/responses/${status}/content/${pointerEscape(mediaType)}/schema`)
        )
      }
      const requestMediaType = Object.keys(op.requestBody?.content ?? {})[0]
      const requestValidator = requestMediaType === undefined
        ? undefined
        : compile(requestAjv, `${base}/requestBody/content/${pointerEscape(requestMediaType)}/schema`)
      operations.push({
        operationId: op.operationId,
        method: method.toUpperCase(),
        path,
        statuses: new Set(Object.keys(responses).map(Number)),
        mediaType: (status) => Object.keys(responses[String(status)]?.content ?? {})[0],
        validateResponse: (status, body) => {
          const validate = validators.get(status)
          if (validate === undefined) return undefined
          return validate(body) ? [] : messages(validate)
        },
        validateRequest: requestValidator === undefined
          ? undefined
          : (body) => (requestValidator(body) ? [] : messages(requestValidator)),
        requestSchema: requestMediaType === undefined ? undefined : op.requestBody.content[requestMediaType].schema,
        requestMediaType
      })
    }
  }

  const deref = (schema: any): any => {
    if (schema === null || typeof schema !== "object" || typeof schema.$ref !== "string") return schema
    const path = schema.$ref.replace(/^#\//, "").split("/").map((s: string) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
    let target: any = doc
    for (const segment of path) target = target?.[segment]
    if (target === undefined) throw new Error(`unresolved reference ${schema.$ref}`)
    return deref(target)
  }

  const byId = (operationId: string) => {
    const op = operations.find((o) => o.operationId === operationId)
    if (op === undefined) throw new Error(`no operation ${operationId} in the document`)
    return op
  }
  return {
    doc,
    operations,
    byId,
    find: (method, path) => operations.find((o) => o.method === method.toUpperCase() && o.path === path),
    methodsOf: (path) => operations.filter((o) => o.path === path).map((o) => o.method),
    deref
  }
}
