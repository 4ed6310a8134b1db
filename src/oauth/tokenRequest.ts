/**
 * Reading a token request (RFC 6749 §2.3.1, §3.2, Appendix B): the form-urlencoded body and the HTTP
 * Basic client credentials. Pure functions; the endpoint decides what each outcome answers.
 *
 * Why not a Schema decode of the form: RFC 6749 wants a repeated parameter refused and an unknown one
 * ignored, and a decoded record can no longer tell the two apart.
 */
import { Redacted } from "effect"

/** Form decoding of one name or value (RFC 6749 App. B): `+` is a space, then %XX as UTF-8. */
export const formDecode = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw.replace(/\+/g, " "))
  } catch {
    return undefined // bad %-escape or bytes that are not UTF-8
  }
}

/**
 * A `Content-Encoding` other than `identity`: refused, since the body is read as sent and a gateway that
 * decodes it would read another one.
 */
export const isEncoded = (contentEncoding: string | undefined): boolean =>
  contentEncoding !== undefined && !/^\s*(identity\s*)?$/i.test(contentEncoding)

/** Media type `application/x-www-form-urlencoded`, case-insensitive; a charset parameter must be UTF-8. */
export const isFormContentType = (contentType: string | undefined): boolean => {
  if (contentType === undefined) return false
  const [type = "", ...parameters] = contentType.split(";")
  if (type.trim().toLowerCase() !== "application/x-www-form-urlencoded") return false
  return parameters.every((p) => {
    const eq = p.indexOf("=")
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== "charset") return true
    return p.slice(eq + 1).trim().replace(/^"|"$/g, "").toLowerCase() === "utf-8"
  })
}

/**
 * Client credentials in the body: a client assertion (private_key_jwt, RFC 7523 §2.2), never next to
 * Basic (one method, §2.3), except a `client_id` naming the client, which client libraries send (C6).
 * A `client_secret` in the body (client_secret_post) is not supported.
 */
const BODY_CREDENTIALS = ["client_id", "client_secret", "client_assertion", "client_assertion_type"] as const

/** Parameters the endpoint interprets; a repeat of one of them is an error, of others is ignored. */
const KNOWN_PARAMETERS = ["grant_type", "scope", ...BODY_CREDENTIALS]

/** The parameters the endpoint reads; an empty value is absent (§3.2). */
interface TokenForm {
  readonly grantType: string | undefined
  readonly scope: string | undefined
  /** Which of `BODY_CREDENTIALS` the body carries, in that order. */
  readonly bodyCredentials: ReadonlyArray<string>
  /** The body's `client_id`, decoded. */
  readonly clientId: string | undefined
  readonly clientAssertionType: string | undefined
  readonly clientAssertion: string | undefined
}

export type FormParse =
  | { readonly _tag: "Ok"; readonly form: TokenForm }
  | { readonly _tag: "Bad"; readonly description: string }

export const parseTokenForm = (body: string): FormParse => {
  const values = new Map<string, Array<string>>()
  for (const pair of body.split("&")) {
    if (pair === "") continue
    const eq = pair.indexOf("=")
    const name = formDecode(eq < 0 ? pair : pair.slice(0, eq))
    const value = formDecode(eq < 0 ? "" : pair.slice(eq + 1))
    if (name === undefined || value === undefined) {
      return { _tag: "Bad", description: "The request body contains a malformed percent-encoding." }
    }
    // RFC 6749 §3.2: a parameter sent without a value is treated as omitted.
    if (value === "") continue
    const list = values.get(name)
    if (list === undefined) values.set(name, [value])
    else list.push(value)
  }
  for (const name of KNOWN_PARAMETERS) {
    if ((values.get(name)?.length ?? 0) > 1) {
      return { _tag: "Bad", description: `The ${name} parameter is repeated; send it at most once.` }
    }
  }
  return {
    _tag: "Ok",
    form: {
      grantType: values.get("grant_type")?.[0],
      scope: values.get("scope")?.[0],
      bodyCredentials: BODY_CREDENTIALS.filter((name) => values.has(name)),
      clientId: values.get("client_id")?.[0],
      clientAssertionType: values.get("client_assertion_type")?.[0],
      clientAssertion: values.get("client_assertion")?.[0]
    }
  }
}

export type BasicCredentials =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "OtherScheme" }
  | { readonly _tag: "Malformed"; readonly description: string }
  | { readonly _tag: "Basic"; readonly clientId: string; readonly secret: Redacted.Redacted<string> }

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/
const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * RFC 6749 §2.3.1 / RFC 7617: base64-decode, split at the first `:`, form-urldecode each half. Any
 * deviation is malformed (400 invalid_request), not an authentication failure.
 */
export const parseBasicAuthorization = (header: string | undefined): BasicCredentials => {
  if (header === undefined || header.trim() === "") return { _tag: "Absent" }
  const match = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?: +(.*))?$/.exec(header.trim())
  if (match === null) return { _tag: "Malformed", description: "The Authorization header is malformed." }
  if (match[1]!.toLowerCase() !== "basic") return { _tag: "OtherScheme" }
  const encoded = match[2]?.trim() ?? ""
  const malformed = (description: string): BasicCredentials => ({ _tag: "Malformed", description })
  if (encoded === "" || !BASE64.test(encoded) || encoded.length % 4 === 1 || (encoded.includes("=") && encoded.length % 4 !== 0)) {
    return malformed("The Basic credentials are not valid base64.")
  }
  let decoded: string
  try {
    decoded = utf8.decode(Buffer.from(encoded, "base64"))
  } catch {
    return malformed("The Basic credentials are not valid UTF-8.")
  }
  const colon = decoded.indexOf(":")
  if (colon < 0) return malformed("The Basic credentials have no colon between client id and secret.")
  const clientId = formDecode(decoded.slice(0, colon))
  const secret = formDecode(decoded.slice(colon + 1))
  if (clientId === undefined || secret === undefined) {
    return malformed("The Basic credentials contain a malformed percent-encoding.")
  }
  if (clientId === "") return malformed("The Basic credentials have an empty client id.")
  return { _tag: "Basic", clientId, secret: Redacted.make(secret, { label: "client_secret" }) }
}
