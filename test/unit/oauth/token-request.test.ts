import { Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { formDecode, isFormContentType, parseBasicAuthorization, parseTokenForm } from "../../../src/oauth/tokenRequest.ts"
import { basic, SPECIAL_ID, SPECIAL_SECRET } from "../../support/oauth.ts"

const form = (body: string) => {
  const parsed = parseTokenForm(body)
  if (parsed._tag !== "Ok") throw new Error(`expected a form, got: ${parsed.description}`)
  return parsed.form
}
const refused = (body: string) => {
  const parsed = parseTokenForm(body)
  return parsed._tag === "Bad" ? parsed.description : undefined
}
const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64")
const basicOf = (header: string | undefined) => {
  const c = parseBasicAuthorization(header)
  return c._tag === "Basic" ? { clientId: c.clientId, secret: Redacted.value(c.secret) } : c
}

describe("formDecode (RFC 6749 Appendix B)", () => {
  it("turns + into a space before %-decoding, as UTF-8", () => {
    expect(formDecode("a+b%2Bc%20d")).toBe("a b+c d")
    expect(formDecode("%C3%A9%E5%90%8D")).toBe("é名")
  })

  it("refuses bad escapes and escapes that are not UTF-8", () => {
    expect(formDecode("%zz")).toBeUndefined()
    expect(formDecode("%2")).toBeUndefined()
    expect(formDecode("%C3%28")).toBeUndefined()
  })
})

describe("parseTokenForm", () => {
  it("reads grant_type and scope", () => {
    expect(form("grant_type=client_credentials&scope=rates%3Aread+health:read")).toEqual({
      grantType: "client_credentials",
      scope: "rates:read health:read",
      bodyCredentials: []
    })
  })

  it("treats empty values as absent, also when repeated next to a real value (§3.2)", () => {
    expect(form("grant_type=&scope")).toEqual({ grantType: undefined, scope: undefined, bodyCredentials: [] })
    expect(form("scope=&scope=rates:read&grant_type=x").scope).toBe("rates:read")
    expect(form("")).toEqual({ grantType: undefined, scope: undefined, bodyCredentials: [] })
  })

  it("ignores unknown parameters, even repeated, and stray separators", () => {
    expect(form("&&foo=1&foo=2&audience=x&grant_type=client_credentials&")).toEqual({
      grantType: "client_credentials",
      scope: undefined,
      bodyCredentials: []
    })
  })

  it.each(["grant_type", "scope", "client_id", "client_secret", "client_assertion", "client_assertion_type"])(
    "refuses a repeated %s",
    (name) => {
      expect(refused(`${name}=a&${name}=b`)).toBe(`The ${name} parameter is repeated; send it at most once.`)
    }
  )

  it("refuses a malformed percent-encoding in a name or a value", () => {
    for (const body of ["grant_type=client%5", "scope=%zz", "gr%ZZant=x", "x=%C3%28"]) {
      expect(refused(body)).toBe("The request body contains a malformed percent-encoding.")
    }
  })

  it("names the body credentials present, in a fixed order, and only non-empty ones", () => {
    expect(form("client_secret=s&grant_type=x&client_id=i&client_assertion=").bodyCredentials).toEqual(["client_id", "client_secret"])
    expect(form("client_assertion_type=t&client_assertion=a").bodyCredentials).toEqual(["client_assertion", "client_assertion_type"])
  })

  it("decodes names too: an escaped known name counts as that name", () => {
    expect(form("grant%5Ftype=client_credentials").grantType).toBe("client_credentials")
    expect(refused("grant_type=a&grant%5Ftype=b")).toBeDefined()
  })
})

describe("parseBasicAuthorization (RFC 6749 §2.3.1, RFC 7617)", () => {
  it("is absent without a header or with a blank one", () => {
    expect(parseBasicAuthorization(undefined)).toEqual({ _tag: "Absent" })
    expect(parseBasicAuthorization("   ")).toEqual({ _tag: "Absent" })
  })

  it("recognises another scheme as such", () => {
    expect(parseBasicAuthorization("Bearer abc")).toEqual({ _tag: "OtherScheme" })
    expect(parseBasicAuthorization("Digest")).toEqual({ _tag: "OtherScheme" })
  })

  it("form-decodes the id and the secret after base64, splitting at the first colon", () => {
    expect(basicOf(basic(SPECIAL_ID, SPECIAL_SECRET))).toEqual({ clientId: SPECIAL_ID, secret: SPECIAL_SECRET })
    expect(basicOf(basic(SPECIAL_ID, SPECIAL_SECRET, encodeURIComponent))).toEqual({ clientId: SPECIAL_ID, secret: SPECIAL_SECRET })
    // Unencoded: `+` is a space, and the secret keeps every further colon.
    expect(basicOf(`Basic ${b64("a+b:c:d+")}`)).toEqual({ clientId: "a b", secret: "c:d " })
    expect(basicOf(`Basic ${b64("id:")}`)).toEqual({ clientId: "id", secret: "" })
  })

  it("accepts any case of the scheme and extra spaces around the credentials", () => {
    expect(basicOf(`basic ${b64("id:s")}`)).toEqual({ clientId: "id", secret: "s" })
    expect(basicOf(`  BASIC   ${b64("id:s")}  `)).toEqual({ clientId: "id", secret: "s" })
  })

  it("keeps the secret redacted", () => {
    const c = parseBasicAuthorization(`Basic ${b64("id:top-secret")}`)
    expect(String(c._tag === "Basic" ? c.secret : "")).not.toContain("top-secret")
  })

  it.each([
    ["no credentials after the scheme", "Basic", "The Basic credentials are not valid base64."],
    ["base64url alphabet", `Basic ${b64("a-b:c").replace(/\+/g, "-")}_-`, "The Basic credentials are not valid base64."],
    ["impossible length", "Basic abcde", "The Basic credentials are not valid base64."],
    ["padding in the middle", `Basic ${b64("i:s")}=`, "The Basic credentials are not valid base64."],
    ["extra parts", `Basic ${b64("i:s")} extra`, "The Basic credentials are not valid base64."],
    ["bytes that are not UTF-8", `Basic ${b64(Buffer.from([0x66, 0x3a, 0xff, 0xfe]))}`, "The Basic credentials are not valid UTF-8."],
    ["no colon", `Basic ${b64("client")}`, "The Basic credentials have no colon between client id and secret."],
    ["bad escape in the id", `Basic ${b64("a%zz:s")}`, "The Basic credentials contain a malformed percent-encoding."],
    ["bad escape in the secret", `Basic ${b64("a:s%2")}`, "The Basic credentials contain a malformed percent-encoding."],
    ["empty id", `Basic ${b64(":s")}`, "The Basic credentials have an empty client id."],
    ["no scheme token", "=== x", "The Authorization header is malformed."]
  ])("is malformed with %s", (_, header, description) => {
    expect(parseBasicAuthorization(header)).toEqual({ _tag: "Malformed", description })
  })
})

describe("isFormContentType", () => {
  it.each([
    "application/x-www-form-urlencoded",
    "Application/X-WWW-Form-Urlencoded",
    "application/x-www-form-urlencoded;charset=UTF-8",
    "application/x-www-form-urlencoded ; charset=\"utf-8\"",
    "application/x-www-form-urlencoded; boundary=x"
  ])("accepts %s", (value) => {
    expect(isFormContentType(value)).toBe(true)
  })

  it.each([undefined, "", "application/json", "text/plain", "multipart/form-data", "application/x-www-form-urlencoded; charset=iso-8859-1"])(
    "refuses %s",
    (value) => {
      expect(isFormContentType(value)).toBe(false)
    }
  )
})
