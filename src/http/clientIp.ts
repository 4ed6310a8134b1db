/** The caller's address: the socket peer, or with TRUST_PROXY the first X-Forwarded-For hop. */
import { Option } from "effect"
import type { HttpServerRequest } from "effect/http"

export const clientIp = (request: HttpServerRequest.HttpServerRequest, trustProxy: boolean): string => {
  if (trustProxy) {
    const forwarded = request.headers["x-forwarded-for"]
    const first = forwarded?.split(",")[0]?.trim()
    if (first !== undefined && first !== "" && first.length <= 64) return first
  }
  return Option.getOrElse(request.remoteAddress, () => "unknown")
}
