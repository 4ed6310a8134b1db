/** The caller's address: the socket peer, or with TRUST_PROXY the first X-Forwarded-For hop. */
import { Option } from "effect"
import type { HttpServerRequest } from "effect/http"

/** The rule itself, on raw values: shared by the Effect edge and the Node fast lane. */
export const clientIpFrom = (forwardedFor: string | undefined, peer: string | undefined, trustProxy: boolean): string => {
  if (trustProxy) {
    const first = forwardedFor?.split(",")[0]?.trim()
    if (first !== undefined && first !== "" && first.length <= 64) return first
  }
  return peer ?? "unknown"
}

export const clientIp = (request: HttpServerRequest.HttpServerRequest, trustProxy: boolean): string =>
  clientIpFrom(request.headers["x-forwarded-for"], Option.getOrUndefined(request.remoteAddress), trustProxy)
