/**
 * Brevo emulator: `POST /v3/contacts/doubleOptinConfirmation` as documented (developers.brevo.com
 * create-doi-contact; docs/upstreams.md §5) and as Brevo is seen to answer:
 *   - `api-key` header checked first: none → 401 {"message":"authentication not found in headers",
 *     "code":"unauthorized"}; another → 401 {"code":"unauthorized","message":"Key not found"}
 *   - with the account's IP blocking on (Brevo turns it on by itself after 30 days), a call from an
 *     address not authorised → 401 "We have detected you are using an unrecognised IP address <ip>. ..."
 *   - body checked: missing_parameter for a missing field, invalid_parameter for a bad one
 *     ({"code":"invalid_parameter","message":"email is not valid"} for an invalid address);
 *     `templateId` must be one of the configured double opt-in templates, list ids must exist
 *   - a contact on the blocklist (someone who unsubscribed) → 400, one of `BlocklistedAnswers`
 *   - 201 (empty body) for a new contact, 204 for one already known
 *   - `GET /v3/account` → the account's details (a read-only call, for the live check)
 * Failure modes: see newsletter-kit.ts. 429 carries x-sib-ratelimit-* headers and no Retry-After, like Brevo.
 * Controls (also `POST /__control`): `blocklist(email)` ({"blocklist": email}), `setIpBlocking(on)`
 * ({"ipBlocking": true}); the emulator's own address is never authorised.
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
  /** Contacts on the account's blocklist (unsubscribed). */
  readonly blocklisted?: ReadonlyArray<string>
  /** Which of Brevo's recorded answers a blocklisted contact gets (default "unableToCreate"). */
  readonly blocklistedAnswer?: keyof typeof BlocklistedAnswers
  /** IP blocking on from the start (default off). */
  readonly ipBlocking?: boolean
}

/**
 * What Brevo answered for an address it keeps as another contact or on its blocklist, as reported:
 * the wording; PipedreamHQ/pipedream#15034 (2024, with `metadata`); sendinblue/APIv3-php-library#253
 * (2023, the double opt-in of a blocklisted contact; its tail was cut off in the report).
 */
export const BlocklistedAnswers = {
  unableToCreate: { code: "invalid_parameter", message: "Unable to create contact, email is already associated with another Contact" },
  duplicateWithMetadata: {
    code: "duplicate_parameter",
    message: "Unable to create contact, email is already associated with another Contact",
    metadata: { duplicate_identifiers: ["email"] }
  },
  anotherUser: { code: "invalid_parameter", message: "This sms number or email address is already associated with another user." }
} as const

/** Brevo's refusal of an address outside the account's authorised IPs (wording as Brevo sends it). */
export const unrecognisedIpMessage = (ip: string) =>
  `We have detected you are using an unrecognised IP address ${ip}. If you performed this action make sure to add ` +
  "the new IP address in this link: https://app.brevo.com/security/authorised_ips"

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
  /** Puts an address on the blocklist, as an unsubscribe does. */
  readonly blocklist: (email: string) => void
  readonly setIpBlocking: (on: boolean) => void
}

const DOI_PATH = "/v3/contacts/doubleOptinConfirmation"
const ACCOUNT_PATH = "/v3/account"

/** A GET /v3/account answer of a free account (developers.brevo.com get-account). */
const account = {
  email: "owner@landing.example",
  firstName: "Ada",
  lastName: "Owner",
  companyName: "Landing Example",
  address: { street: "1 Example Street", city: "Paris", zipCode: "75001", country: "France" },
  plan: [{ type: "free", creditsType: "sendLimit", credits: 300 }],
  relay: { enabled: true, data: { userName: "owner@landing.example", relay: "smtp-relay.brevo.com", port: 587 } }
}

const error = (status: number, code: string, message: string): Reply => ({ status, body: { code, message } })

/**
 * The service's variables for an emulator with the default account (key, list 7, the double opt-in
 * templates 11 to 15, one per locale), so that tests and the demo configure it the one way.
 */
export const brevoServiceEnv = (url: string, redirectUrl = "https://www.example.com/confirmed") => ({
  NEWSLETTER_PROVIDER: "brevo",
  BREVO_BASE_URL: url,
  BREVO_API_KEY: "test-brevo-key",
  BREVO_LIST_IDS: "7",
  BREVO_DOI_TEMPLATES: "es:11,en:12,fr:13,it:14,pt:15",
  BREVO_DOI_REDIRECT_URL: redirectUrl
})

export const startBrevoEmulator = async (options: BrevoEmulatorOptions = {}): Promise<BrevoEmulator> => {
  const apiKey = options.apiKey ?? "test-brevo-key"
  const listIds = new Set(options.listIds ?? [7])
  const templates = new Set(options.doiTemplates ?? [11, 12, 13, 14, 15])
  const rejected = new Set((options.rejectEmails ?? []).map((e) => e.toLowerCase()))
  const contacts = new Map<string, BrevoContact>()
  const blocklisted = new Set((options.blocklisted ?? []).map((e) => e.toLowerCase()))
  let ipBlocking = options.ipBlocking === true

  const handle = (request: ReceivedRequest): Reply => {
    const pathname = request.path.split("?")[0]
    if (pathname !== DOI_PATH && pathname !== ACCOUNT_PATH) return error(404, "not_found", "Invalid route")
    if (request.method !== (pathname === DOI_PATH ? "POST" : "GET")) {
      return error(405, "method_not_allowed", `${request.method} is not allowed`)
    }
    const key = request.headers["api-key"]
    if (key === undefined) return { status: 401, body: { message: "authentication not found in headers", code: "unauthorized" } }
    if (key !== apiKey) return error(401, "unauthorized", "Key not found")
    // The key names the account, whose IP settings then apply.
    if (ipBlocking) return error(401, "unauthorized", unrecognisedIpMessage(request.remoteAddress.replace(/^::ffff:/, "")))
    if (pathname === ACCOUNT_PATH) return { status: 200, body: account }
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

    const address = email.toLowerCase()
    if (blocklisted.has(address)) return { status: 400, body: BlocklistedAnswers[options.blocklistedAnswer ?? "unableToCreate"] }
    const known = contacts.get(address)
    contacts.set(address, {
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

  const control = (command: Record<string, unknown>): void => {
    if (command.blocklist !== undefined) {
      if (typeof command.blocklist !== "string") throw new Error("blocklist: expected an e-mail address")
      blocklisted.add(command.blocklist.toLowerCase())
    }
    if (command.ipBlocking !== undefined) {
      if (typeof command.ipBlocking !== "boolean") throw new Error("ipBlocking: expected true or false")
      ipBlocking = command.ipBlocking
    }
  }

  const emulator = await startEmulator(
    {
      name: "brevo",
      basePath: "/v3",
      handle,
      failure,
      control,
      // Back to the options' account: no contact, their blocklist and IP setting.
      resetState: () => {
        contacts.clear()
        blocklisted.clear()
        for (const e of options.blocklisted ?? []) blocklisted.add(e.toLowerCase())
        ipBlocking = options.ipBlocking === true
      }
    },
    { ...(options.port !== undefined ? { port: options.port } : {}), ...(options.host !== undefined ? { host: options.host } : {}) }
  )
  return {
    ...emulator,
    contacts: () => new Map(contacts),
    blocklist: (email) => void blocklisted.add(email.toLowerCase()),
    setIpBlocking: (on) => {
      ipBlocking = on
    }
  }
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
