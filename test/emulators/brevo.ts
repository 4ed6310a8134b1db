/**
 * Brevo emulator: `POST /v3/contacts/doubleOptinConfirmation` as documented (developers.brevo.com
 * create-doi-contact; upstreams.md §3.2):
 *   - `api-key` header checked first: 401 {"code":"unauthorized","message":"Key not found"}
 *   - body checked: missing_parameter for a missing field, invalid_parameter for a bad one
 *     ({"code":"invalid_parameter","message":"email is not valid"} for an invalid address);
 *     `templateId` must be one of the configured double opt-in templates, list ids must exist
 *   - 201 (empty body) for a new contact, 204 for one already known
 * Failure modes: see newsletter-kit.ts. 429 carries x-sib-ratelimit-* headers and no Retry-After, like Brevo.
 *
 * Programmatic: `await startBrevoEmulator({ apiKey, listIds, doiTemplates })`.
 * Standalone:   `node test/emulators/brevo.ts --port 4102 [--api-key K] [--list-ids 7] [--templates 11,12,13,14,15]`
 */
import validator from "validator"
import { captivePortalAnswer, cliOptions, type Emulator, type ProviderBehaviour, type ReceivedRequest, type Reply, runStandalone, startEmulator } from "./newsletter-kit.ts"

export type { Emulator, Fault, FaultMode, ReceivedRequest } from "./newsletter-kit.ts"

export interface BrevoEmulatorOptions {
  readonly port?: number
  readonly host?: string
  /** The only key accepted (default "test-brevo-key"). */
  readonly apiKey?: string
  /** Lists that exist in the account (default [7]). */
  readonly listIds?: ReadonlyArray<number>
  /** Double opt-in templates in the account (default 11..15). */
  readonly doiTemplates?: ReadonlyArray<number>
  /** Addresses Brevo calls invalid although they are well-formed (compared case-insensitively). */
  readonly rejectEmails?: ReadonlyArray<string>
}

export interface BrevoContact {
  readonly email: string
  readonly listIds: ReadonlyArray<number>
  readonly attributes: Readonly<Record<string, unknown>>
  readonly templateId: number
  readonly redirectionUrl: string
}

export interface BrevoEmulator extends Emulator {
  /** Contacts by lower-cased address (Brevo compares addresses case-insensitively). */
  readonly contacts: () => ReadonlyMap<string, BrevoContact>
}

const DOI_PATH = "/v3/contacts/doubleOptinConfirmation"

const error = (status: number, code: string, message: string): Reply => ({ status, body: { code, message } })

export const startBrevoEmulator = async (options: BrevoEmulatorOptions = {}): Promise<BrevoEmulator> => {
  const apiKey = options.apiKey ?? "test-brevo-key"
  const listIds = new Set(options.listIds ?? [7])
  const templates = new Set(options.doiTemplates ?? [11, 12, 13, 14, 15])
  const rejected = new Set((options.rejectEmails ?? []).map((e) => e.toLowerCase()))
  const contacts = new Map<string, BrevoContact>()

  const handle = (request: ReceivedRequest): Reply => {
    const pathname = request.path.split("?")[0]
    if (pathname !== DOI_PATH) return error(404, "not_found", "Invalid route")
    if (request.method !== "POST") return error(405, "method_not_allowed", `${request.method} is not allowed`)
    if (request.headers["api-key"] !== apiKey) return error(401, "unauthorized", "Key not found")
    const body = request.body
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return error(400, "bad_request", "Input must be a valid JSON object")
    }
    const b = body as Record<string, unknown>

    for (const field of ["email", "includeListIds", "templateId", "redirectionUrl"]) {
      if (b[field] === undefined || b[field] === null) return error(400, "missing_parameter", `${field} is missing`)
    }
    const email = b.email
    if (
      typeof email !== "string" ||
      !validator.isEmail(email, { allow_utf8_local_part: false, require_tld: true, allow_ip_domain: false }) ||
      rejected.has(email.toLowerCase())
    ) {
      return error(400, "invalid_parameter", "email is not valid")
    }
    const lists = b.includeListIds
    if (!Array.isArray(lists) || lists.length === 0 || !lists.every((id) => Number.isInteger(id) && id > 0)) {
      return error(400, "invalid_parameter", "includeListIds should be an array of positive integers")
    }
    const unknown = lists.filter((id) => !listIds.has(id as number))
    if (unknown.length > 0) return error(404, "document_not_found", `List ID(s) ${unknown.join(", ")} not found`)
    const templateId = b.templateId
    if (typeof templateId !== "number" || !Number.isInteger(templateId)) {
      return error(400, "invalid_parameter", "templateId should be an integer")
    }
    if (!templates.has(templateId)) {
      return error(400, "invalid_parameter", "templateId is not a valid double opt-in template")
    }
    const redirectionUrl = b.redirectionUrl
    if (typeof redirectionUrl !== "string" || !URL.canParse(redirectionUrl)) {
      return error(400, "invalid_parameter", "redirectionUrl is not valid")
    }
    const attributes = b.attributes ?? {}
    if (typeof attributes !== "object" || attributes === null || Array.isArray(attributes)) {
      return error(400, "invalid_parameter", "attributes should be an object")
    }

    const key = email.toLowerCase()
    const known = contacts.get(key)
    contacts.set(key, {
      email,
      listIds: [...new Set([...(known?.listIds ?? []), ...(lists as Array<number>)])],
      attributes: { ...known?.attributes, ...(attributes as Record<string, unknown>) },
      templateId,
      redirectionUrl
    })
    // 201 "DOI Contact created", 204 "DOI Contact updated"; both with an empty body.
    return { status: known === undefined ? 201 : 204 }
  }

  const failure: ProviderBehaviour["failure"] = (mode) => {
    switch (mode) {
      case "500":
        return error(500, "internal_error", "Internal server error")
      case "503":
        return {
          status: 503,
          headers: { "content-type": "text/html" },
          body: "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
        }
      case "429":
        return {
          status: 429,
          headers: { "x-sib-ratelimit-limit": "10", "x-sib-ratelimit-remaining": "0", "x-sib-ratelimit-reset": "42" },
          body: { code: "too_many_requests", message: "The expected rate limit is exceeded." }
        }
      case "401":
        return error(401, "unauthorized", "Key not found")
      case "403":
        return error(403, "permission_denied", "Your account is not allowed to use this endpoint")
      case "html":
        return captivePortalAnswer
      case "garbage":
        return { status: 201, headers: { "content-type": "application/json" }, body: "{\"id\": 12" }
    }
  }

  const emulator = await startEmulator(
    { name: "brevo", basePath: "/v3", handle, failure, resetState: () => contacts.clear() },
    { ...(options.port !== undefined ? { port: options.port } : {}), ...(options.host !== undefined ? { host: options.host } : {}) }
  )
  return { ...emulator, contacts: () => new Map(contacts) }
}

if (import.meta.main) {
  const args = cliOptions(process.argv.slice(2))
  const numbers = (value: string | undefined) => value?.split(",").map((v) => Number(v.trim()))
  const listIds = numbers(args.get("list-ids"))
  const doiTemplates = numbers(args.get("templates"))
  const apiKey = args.get("api-key")
  const host = args.get("host")
  void runStandalone("brevo", () =>
    startBrevoEmulator({
      port: Number(args.get("port") ?? 4102),
      ...(host !== undefined ? { host } : {}),
      ...(apiKey !== undefined ? { apiKey } : {}),
      ...(listIds !== undefined ? { listIds } : {}),
      ...(doiTemplates !== undefined ? { doiTemplates } : {})
    }))
}
