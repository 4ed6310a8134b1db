/** The id of the request being served, set by the edge for everything below it (logs, problems). */
import { Context } from "effect"

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A client's X-Request-Id is echoed when it is a UUID (it becomes the problem's urn:uuid instance). */
export const requestIdOf = (header: string | undefined) =>
  header !== undefined && uuidPattern.test(header) ? header.toLowerCase() : crypto.randomUUID()

export const CurrentRequestId = Context.Reference<string>("app/CurrentRequestId", { defaultValue: () => "" })
