/**
 * Listmonk emulator, as knadh/listmonk (v5+) answers (docs/upstreams.md §6):
 *   - `POST /api/public/subscription` (cmd/public.go processSubForm):
 *     public subscription disabled → 400 {"message":"That feature is not available."};
 *     no list → 400 "No valid lists selected to subscribe."; invalid address → 400 "Invalid email.";
 *     blocklisted domain → 400 "The e-mail domain is blocklisted."; a private list → 400 "Invalid UUID(s)";
 *     a list UUID that does not exist is skipped without a word: the address is put on file in no list,
 *     200 {"data":{"has_optin":false}} (the insert joins only the lists it finds);
 *     new subscriber → 200 has_optin true when a list is double opt-in; already on file → lists updated, false
 *   - `GET /api/public/lists` → [{"uuid","name"}] of the public lists, unauthenticated
 *   - the admin API behind API users (Listmonk 4+ internal/auth: `Authorization: token user:token`, or
 *     Basic): `GET /api/lists` with `minimal`, `per_page` (default 20, `all`), `page`, `query` (the name),
 *     `type`, `optin`, `status`; a refused token → 403 {"message":"invalid API credentials"}, no header →
 *     403 "invalid session", a header in another scheme → 403 "code=400, message=unknown Authorization scheme"
 * Failure modes: see newsletter-kit.ts. Lists can be deleted or changed while it runs (`setList`,
 * `deleteList`, or `POST /__control {"deleteList": uuid}`).
 *
 * Programmatic: `await startListmonkEmulator({ lists: [{ uuid, optin: "double" }], apiUser: { user, token } })`.
 * Standalone:   `node test/emulators/listmonk.ts --port 4103 [--lists uuid1,uuid2,...] [--api-user u --api-token t]`
 */
import validator from "validator"
import { captivePortalAnswer, cliOptions, type Emulator, type ProviderBehaviour, type ReceivedRequest, type Reply, runStandalone, startEmulator } from "./newsletter-kit.ts"

export type { Emulator, Fault, FaultMode, ReceivedRequest } from "./newsletter-kit.ts"

export interface ListmonkList {
  readonly uuid: string
  /** Default: "List <n>". */
  readonly name?: string
  /** Default "double". */
  readonly optin?: "double" | "single"
  /** Default "public"; private lists cannot be subscribed to through the public API. */
  readonly type?: "public" | "private"
  /** Default "active". */
  readonly status?: "active" | "archived"
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
  /** The one API user (with the lists:get_all permission); without it every token is refused. */
  readonly apiUser?: { readonly user: string; readonly token: string }
}

export interface ListmonkSubscriber {
  readonly email: string
  readonly name: string
  readonly lists: ReadonlyArray<string>
}

export interface ListmonkEmulator extends Emulator {
  /** Subscribers by address (listmonk stores addresses lower-cased). */
  readonly subscribers: () => ReadonlyMap<string, ListmonkSubscriber>
  /** Adds a list or changes one (by UUID), as the admin would. */
  readonly setList: (list: ListmonkList | string) => void
  readonly deleteList: (uuid: string) => void
}

/** listmonk's stdInputMaxLen. */
const MAX_NAME = 200
/** knadh/paginator as listmonk configures it (cmd/main.go). */
const DEFAULT_PER_PAGE = 20

interface StoredList {
  readonly id: number
  readonly uuid: string
  readonly name: string
  readonly type: "public" | "private"
  readonly optin: "double" | "single"
  readonly status: "active" | "archived"
  readonly created_at: string
}

const message = (status: number, text: string): Reply => ({ status, body: { message: text } })

export const startListmonkEmulator = async (options: ListmonkEmulatorOptions = {}): Promise<ListmonkEmulator> => {
  const lists = new Map<string, StoredList>()
  let nextId = 1
  const setList = (list: ListmonkList | string): void => {
    const l = typeof list === "string" ? { uuid: list } : list
    const uuid = l.uuid.toLowerCase()
    const known = lists.get(uuid)
    const id = known?.id ?? nextId++
    lists.set(uuid, {
      id,
      uuid,
      name: l.name ?? known?.name ?? `List ${id}`,
      type: l.type ?? known?.type ?? "public",
      optin: l.optin ?? known?.optin ?? "double",
      status: l.status ?? known?.status ?? "active",
      created_at: known?.created_at ?? new Date().toISOString()
    })
  }
  for (const list of options.lists ?? []) setList(list)
  const blocklist = new Set((options.blocklistDomains ?? []).map((d) => d.toLowerCase()))
  const subscribers = new Map<string, ListmonkSubscriber>()

  const subscribe = (request: ReceivedRequest): Reply => {
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
    if (blocklist.has(email.slice(email.lastIndexOf("@") + 1))) return message(400, "The e-mail domain is blocklisted.")
    let name = typeof b.name === "string" ? b.name.trim() : ""
    if (name === "") name = email.split("@")[0] ?? ""
    else if (name.length > MAX_NAME) return message(400, "Invalid name.")
    // Only the lists found are looked at: a private one is refused, an unknown one is skipped.
    const found = uuids.flatMap((u) => lists.get(u.toLowerCase()) ?? [])
    if (found.some((l) => l.type === "private")) return message(400, "Invalid UUID(s)")

    const known = subscribers.get(email)
    subscribers.set(email, {
      email,
      name: known?.name ?? name,
      lists: [...new Set([...(known?.lists ?? []), ...found.map((l) => l.uuid)])]
    })
    const hasOptin = known === undefined && found.some((l) => l.optin === "double")
    return { status: 200, body: { data: { has_optin: hasOptin } } }
  }

  /** internal/auth Middleware: every refusal is a 403 carrying the reason. */
  const authenticate = (request: ReceivedRequest): Reply | undefined => {
    const header = request.headers.authorization
    const value = (typeof header === "string" ? header : "").trim()
    if (value === "") return message(403, "invalid session")
    let pair: Array<string>
    if (value.startsWith("token")) pair = value.slice("token".length).trim().split(/:(.*)/s, 2)
    else if (value.startsWith("Basic")) pair = Buffer.from(value.slice("Basic".length).trim(), "base64").toString("utf8").split(/:(.*)/s, 2)
    else return message(403, "code=400, message=unknown Authorization scheme")
    if (pair.length < 2) return message(403, "code=400, message=api_key:token missing")
    if (pair[0] === "" || pair[1] === "") return message(403, "code=400, message=empty `api_key` or `token`")
    const user = options.apiUser
    if (user === undefined || pair[0] !== user.user || pair[1] !== user.token) return message(403, "invalid API credentials")
    return undefined
  }

  const asResult = (l: StoredList) => ({
    id: l.id,
    created_at: l.created_at,
    updated_at: l.created_at,
    uuid: l.uuid,
    name: l.name,
    type: l.type,
    optin: l.optin,
    status: l.status,
    tags: [],
    description: "",
    subscriber_count: [...subscribers.values()].filter((s) => s.lists.includes(l.uuid)).length,
    subscriber_statuses: {}
  })

  /** cmd/lists.go GetLists. */
  const getLists = (query: URLSearchParams): Reply => {
    const all = [...lists.values()].sort((a, b) => a.id - b.id)
    if (/^(1|t|true)$/i.test(query.get("minimal") ?? "")) {
      const status = query.get("status") ?? ""
      const results = all.filter((l) => status === "" || l.status === status).map(asResult)
      // Listmonk's own quirk: no list at all is `"data": []`, not an empty page.
      if (results.length === 0) return { status: 200, body: { data: [] } }
      return { status: 200, body: { data: { results, search: "", query: "", total: results.length, per_page: results.length, page: 1 } } }
    }
    const search = (query.get("query") ?? "").trim()
    const matching = all.filter((l) =>
      (search === "" || l.name.toLowerCase().includes(search.toLowerCase())) &&
      [["type", l.type], ["optin", l.optin], ["status", l.status]].every(([k, v]) => (query.get(k!) ?? "") === "" || query.get(k!) === v)
    )
    const rawPerPage = query.get("per_page")
    const perPage = rawPerPage === "all" ? 0 : Number.parseInt(rawPerPage ?? "", 10) > 0 ? Number.parseInt(rawPerPage!, 10) : DEFAULT_PER_PAGE
    const page = Math.max(1, Number.parseInt(query.get("page") ?? "", 10) || 1)
    const results = perPage === 0 ? matching : matching.slice((page - 1) * perPage, page * perPage)
    return {
      status: 200,
      body: { data: { results: results.map(asResult), search: "", query: search, total: matching.length, per_page: perPage, page } }
    }
  }

  const handle = (request: ReceivedRequest): Reply => {
    const [pathname = "", search = ""] = request.path.split("?")
    if (pathname === "/api/public/subscription") {
      return request.method === "POST" ? subscribe(request) : message(405, "Method Not Allowed")
    }
    if (pathname === "/api/public/lists" && request.method === "GET") {
      const open = [...lists.values()].filter((l) => l.type === "public" && l.status === "active").sort((a, b) => a.id - b.id)
      return { status: 200, body: open.map((l) => ({ uuid: l.uuid, name: l.name })) }
    }
    if (pathname.startsWith("/api/") && !pathname.startsWith("/api/public/")) {
      const refused = authenticate(request)
      if (refused !== undefined) return refused
      if (pathname === "/api/lists" && request.method === "GET") return getLists(new URLSearchParams(search))
    }
    return message(404, "Not Found")
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

  const control = (command: Record<string, unknown>): void => {
    if (typeof command.deleteList === "string") lists.delete(command.deleteList.toLowerCase())
  }

  const emulator = await startEmulator(
    { name: "listmonk", basePath: "", handle, failure, control, resetState: () => subscribers.clear() },
    { ...(options.port !== undefined ? { port: options.port } : {}), ...(options.host !== undefined ? { host: options.host } : {}) }
  )
  return {
    ...emulator,
    subscribers: () => new Map(subscribers),
    setList,
    deleteList: (uuid) => void lists.delete(uuid.toLowerCase())
  }
}

if (import.meta.main) {
  const args = cliOptions(process.argv.slice(2))
  const host = args.get("host")
  const lists = args.get("lists")?.split(",").map((u) => u.trim()).filter((u) => u !== "")
  const user = args.get("api-user")
  const token = args.get("api-token")
  void runStandalone("listmonk", () =>
    startListmonkEmulator({
      port: Number(args.get("port") ?? 4103),
      ...(host !== undefined ? { host } : {}),
      ...(user !== undefined && token !== undefined ? { apiUser: { user, token } } : {}),
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
