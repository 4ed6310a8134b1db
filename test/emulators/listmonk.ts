/**
 * Listmonk emulator: `POST /api/public/subscription` as knadh/listmonk cmd/public.go implements it
 * (upstreams.md §3.3):
 *   - public subscription disabled → 400 {"message":"That feature is not available."}
 *   - no list → 400 "No valid lists selected to subscribe."; unknown or private list → 400 "Invalid UUID(s)"
 *   - invalid address → 400 {"message":"Invalid email."}; blocklisted domain → 400 "Domain is blocklisted."
 *   - new subscriber → 200 {"data":{"has_optin":true}} (double opt-in list); already on file → its
 *     lists are updated and has_optin is false
 * Failure modes: see newsletter-kit.ts.
 *
 * Programmatic: `await startListmonkEmulator({ lists: [{ uuid, optin: "double" }] })`.
 * Standalone:   `node test/emulators/listmonk.ts --port 4103 [--lists uuid1,uuid2,...]`
 */
import validator from "validator"
import { captivePortalAnswer, cliOptions, type Emulator, type ProviderBehaviour, type ReceivedRequest, type Reply, runStandalone, startEmulator } from "./newsletter-kit.ts"

export type { Emulator, Fault, FaultMode, ReceivedRequest } from "./newsletter-kit.ts"

export interface ListmonkList {
  readonly uuid: string
  /** Default "double". */
  readonly optin?: "double" | "single"
  /** Default "public"; private lists cannot be subscribed to through the public API. */
  readonly type?: "public" | "private"
}

export interface ListmonkEmulatorOptions {
  readonly port?: number
  readonly host?: string
  /** Lists that exist; a bare string is a public double opt-in list. */
  readonly lists?: ReadonlyArray<ListmonkList | string>
  /** The "public subscription page" setting (default true). */
  readonly publicSubscription?: boolean
  /** Domains on the instance's blocklist. */
  readonly blocklistDomains?: ReadonlyArray<string>
}

export interface ListmonkSubscriber {
  readonly email: string
  readonly name: string
  readonly lists: ReadonlyArray<string>
}

export interface ListmonkEmulator extends Emulator {
  /** Subscribers by address (listmonk stores addresses lower-cased). */
  readonly subscribers: () => ReadonlyMap<string, ListmonkSubscriber>
}

const SUBSCRIPTION_PATH = "/api/public/subscription"
/** listmonk's stdInputMaxLen. */
const MAX_NAME = 200

const message = (status: number, text: string): Reply => ({ status, body: { message: text } })

export const startListmonkEmulator = async (options: ListmonkEmulatorOptions = {}): Promise<ListmonkEmulator> => {
  const lists = new Map<string, Required<ListmonkList>>()
  for (const list of options.lists ?? []) {
    const l = typeof list === "string" ? { uuid: list } : list
    lists.set(l.uuid.toLowerCase(), { uuid: l.uuid.toLowerCase(), optin: l.optin ?? "double", type: l.type ?? "public" })
  }
  const blocklist = new Set((options.blocklistDomains ?? []).map((d) => d.toLowerCase()))
  const subscribers = new Map<string, ListmonkSubscriber>()

  const handle = (request: ReceivedRequest): Reply => {
    const pathname = request.path.split("?")[0]
    if (pathname !== SUBSCRIPTION_PATH) return message(404, "Not Found")
    if (request.method !== "POST") return message(405, "Method Not Allowed")
    if (options.publicSubscription === false) return message(400, "That feature is not available.")
    const body = request.body
    if (typeof body !== "object" || body === null || Array.isArray(body)) return message(400, "Syntax error: invalid JSON")
    const b = body as Record<string, unknown>

    const uuids = Array.isArray(b.list_uuids) ? b.list_uuids.filter((u): u is string => typeof u === "string") : []
    if (uuids.length === 0) return message(400, "No valid lists selected to subscribe.")
    const rawEmail = typeof b.email === "string" ? b.email : ""
    if (rawEmail.length > 1000) return message(400, "Invalid email.")
    const email = rawEmail.trim().toLowerCase()
    if (!validator.isEmail(email, { require_tld: true, allow_ip_domain: false, allow_display_name: false })) {
      return message(400, "Invalid email.")
    }
    if (blocklist.has(email.slice(email.lastIndexOf("@") + 1))) return message(400, "Domain is blocklisted.")
    let name = typeof b.name === "string" ? b.name.trim() : ""
    if (name === "") name = email.split("@")[0] ?? ""
    else if (name.length > MAX_NAME) return message(400, "Invalid name.")
    const targets = uuids.map((u) => lists.get(u.toLowerCase()))
    if (targets.some((l) => l === undefined || l.type === "private")) return message(400, "Invalid UUID(s)")

    const known = subscribers.get(email)
    const listUuids = targets.map((l) => l!.uuid)
    subscribers.set(email, { email, name: known?.name ?? name, lists: [...new Set([...(known?.lists ?? []), ...listUuids])] })
    const hasOptin = known === undefined && targets.some((l) => l!.optin === "double")
    return { status: 200, body: { data: { has_optin: hasOptin } } }
  }

  const failure: ProviderBehaviour["failure"] = (mode) => {
    switch (mode) {
      case "500":
        return message(500, "Error processing request. Please retry.")
      case "503":
        return {
          status: 503,
          headers: { "content-type": "text/html" },
          body: "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
        }
      case "429":
        return message(429, "Too many requests")
      case "401":
        return { status: 401, headers: { "www-authenticate": "Basic realm=\"listmonk\"" }, body: { message: "Invalid credentials" } }
      case "403":
        return message(403, "Permission denied")
      case "html":
        return captivePortalAnswer
      case "garbage":
        return { status: 200, headers: { "content-type": "application/json" }, body: "{\"data\":{\"has_optin\":" }
    }
  }

  const emulator = await startEmulator(
    { name: "listmonk", basePath: "", handle, failure, resetState: () => subscribers.clear() },
    { ...(options.port !== undefined ? { port: options.port } : {}), ...(options.host !== undefined ? { host: options.host } : {}) }
  )
  return { ...emulator, subscribers: () => new Map(subscribers) }
}

if (import.meta.main) {
  const args = cliOptions(process.argv.slice(2))
  const host = args.get("host")
  const lists = args.get("lists")?.split(",").map((u) => u.trim()).filter((u) => u !== "")
  void runStandalone("listmonk", () =>
    startListmonkEmulator({
      port: Number(args.get("port") ?? 4103),
      ...(host !== undefined ? { host } : {}),
      // Without --lists, one well-known list per locale so the emulator is usable out of the box.
      lists: lists ?? [
        "6f1c2a1e-0000-4000-8000-00000000e501",
        "6f1c2a1e-0000-4000-8000-00000000e502",
        "6f1c2a1e-0000-4000-8000-00000000e503",
        "6f1c2a1e-0000-4000-8000-00000000e504",
        "6f1c2a1e-0000-4000-8000-00000000e505"
      ]
    }))
}
