import { Result } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { maskEmail, validateEmail } from "../../../src/newsletter/email.ts"

const label = (c: string, n: number) => c.repeat(n)

/** input → normalised address (docs/upstreams.md §8, and more). */
const accepted: ReadonlyArray<readonly [string, string]> = [
  ["user@example.com", "user@example.com"],
  ["  user@example.com \n", "user@example.com"],
  ["\tuser@example.com", "user@example.com"],
  ["User.Name+tag@Example.COM", "User.Name+tag@example.com"],
  ["JOHN@EXAMPLE.COM", "JOHN@example.com"],
  ["user@münchen.de", "user@xn--mnchen-3ya.de"],
  ["user@MÜNCHEN.DE", "user@xn--mnchen-3ya.de"],
  ["user@xn--mnchen-3ya.de", "user@xn--mnchen-3ya.de"],
  ["user@XN--MNCHEN-3YA.DE", "user@xn--mnchen-3ya.de"],
  ["user@例え.jp", "user@xn--r8jz45g.jp"],
  ["user@пример.рф", "user@xn--e1afmkfd.xn--p1ai"],
  ["user@bücher.example", "user@xn--bcher-kva.example"],
  ["o'reilly@example.ie", "o'reilly@example.ie"],
  ["first.last@sub.domain.example.co.uk", "first.last@sub.domain.example.co.uk"],
  ["x@a.b.c.d.example.com", "x@a.b.c.d.example.com"],
  ["a-b_c@example-domain.com", "a-b_c@example-domain.com"],
  ["1234567890@example.com", "1234567890@example.com"],
  ["!#$%&'*+-/=?^_`{|}~@example.org", "!#$%&'*+-/=?^_`{|}~@example.org"],
  [`${label("a", 64)}@example.com`, `${label("a", 64)}@example.com`],
  // 64 + 1 + 189 = 254 characters exactly.
  [
    `${label("a", 64)}@${label("b", 63)}.${label("c", 63)}.${label("d", 57)}.com`,
    `${label("a", 64)}@${label("b", 63)}.${label("c", 63)}.${label("d", 57)}.com`
  ]
]

/** input → a word the reason must contain. */
const rejected: ReadonlyArray<readonly [unknown, string]> = [
  [42, "must be a string"],
  [null, "must be a string"],
  [undefined, "must be a string"],
  [["user@example.com"], "must be a string"],
  [{ email: "user@example.com" }, "must be a string"],
  ["", "must not be empty"],
  ["   ", "must not be empty"],
  ["a..b@example.com", "not a valid e-mail address"],
  [".user@example.com", "not a valid e-mail address"],
  ["user.@example.com", "not a valid e-mail address"],
  ["user@localhost", "top-level domain"],
  ["test@test", "top-level domain"],
  ["üser@example.com", "ASCII"],
  ["josé@example.com", "ASCII"],
  ["\"john doe\"@example.com", "quoted local part"],
  ["\"a@b\"@example.com", "quoted local part"],
  ["John <john@example.com>", "display name"],
  ["<john@example.com>", "display name"],
  ["user@[192.168.0.1]", "IP address"],
  ["user@192.168.0.1", "IP address"],
  ["user@[IPv6:2001:db8::1]", "IP address"],
  [`${label("a", 65)}@example.com`, "at most 64 characters before the @"],
  [`${label("a", 64)}@${label("b", 63)}.${label("c", 63)}.${label("d", 58)}.com`, "at most 254 characters"],
  [`${label("a", 300)}@example.com`, "at most 254 characters"],
  ["userexample.com", "must contain an @ sign"],
  ["@example.com", "local part before the @"],
  ["user@", "domain after the @"],
  ["a@b@example.com", "single @ sign"],
  ["user@@example.com", "single @ sign"],
  ["us er@example.com", "spaces"],
  ["user@exa mple.com", "spaces"],
  ["user@ex_ample.com", "not a valid domain name"],
  ["user@-example.com", "not a valid domain name"],
  ["user@example-.com", "not a valid domain name"],
  ["user@example.com.", "not a valid domain name"],
  ["user@example.c", "not a valid domain name"],
  ["user@example.123", "not a valid domain name"],
  ["user@xn--.com", "not a valid domain name"],
  ["user@ＥＸＡＭＰＬＥ.com", "not a valid domain name"],
  [`user@${label("ü", 60)}.de`, "not valid once converted to ASCII"],
  ["user@example.com\nbcc@evil.example", "spaces"],
  ["user\u0000@example.com", "not a valid e-mail address"]
]

describe("validateEmail", () => {
  it.each(accepted)("accepts %j as %j", (input, normalised) => {
    const result = validateEmail(input)
    expect(result).toEqual(Result.succeed(normalised))
  })

  it.each(rejected)("rejects %j with a reason mentioning %j", (input, word) => {
    const result = validateEmail(input)
    expect(Result.isFailure(result)).toBe(true)
    if (Result.isFailure(result)) expect(result.failure).toContain(word)
  })

  it("keeps the local part's case and lower-cases only the domain", () => {
    expect(validateEmail("MiXeD.Case@ExAmPlE.OrG")).toEqual(Result.succeed("MiXeD.Case@example.org"))
  })

  it("is idempotent: a normalised address normalises to itself", () => {
    fc.assert(
      fc.property(fc.emailAddress(), (address) => {
        const once = validateEmail(address)
        if (Result.isFailure(once)) return
        expect(validateEmail(once.success)).toEqual(once)
      }),
      { numRuns: 500 }
    )
  })

  it("only ever yields ASCII addresses of at most 254 characters with a lower-case domain", () => {
    const domainish = fc.stringMatching(/^[a-zA-Z0-9äöüßéあ例-]{1,20}(\.[a-zA-Z0-9äöüé-]{1,20}){0,3}\.[a-zA-Zé]{2,6}$/)
    const localish = fc.stringMatching(/^[a-zA-Z0-9.+_'-]{1,70}$/)
    fc.assert(
      fc.property(localish, domainish, fc.constantFrom("", " ", "\t"), (local, domain, pad) => {
        const result = validateEmail(`${pad}${local}@${domain}${pad}`)
        if (Result.isFailure(result)) {
          expect(result.failure.length).toBeGreaterThan(0)
          return
        }
        const value = result.success
        expect(value.length).toBeLessThanOrEqual(254)
        expect(/^[\x21-\x7e]+$/.test(value)).toBe(true)
        const at = value.lastIndexOf("@")
        expect(value.slice(0, at)).toBe(local)
        expect(value.slice(at + 1)).toBe(value.slice(at + 1).toLowerCase())
      }),
      { numRuns: 1000 }
    )
  })

  it("never throws, whatever it is given", () => {
    fc.assert(
      fc.property(fc.anything(), (input) => {
        const result = validateEmail(input)
        expect(Result.isResult(result)).toBe(true)
      })
    )
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (input) => {
        expect(Result.isResult(validateEmail(input))).toBe(true)
      })
    )
  })
})

describe("maskEmail", () => {
  it.each([
    ["jane.doe@example.com", "j***@example.com"],
    ["j@example.com", "j***@example.com"],
    ["Ünïcode@example.com", "Ü***@example.com"],
    ["@example.com", "***@example.com"],
    ["not-an-address", "***"],
    ["", "***"]
  ])("masks %j as %j", (input, masked) => {
    expect(maskEmail(input)).toBe(masked)
  })

  it("never reveals more than the first character of the local part", () => {
    // Judged on the masked local part alone: the domain may repeat the local part ("aa@a.aa").
    fc.assert(
      fc.property(fc.emailAddress(), (address) => {
        const at = address.lastIndexOf("@")
        const masked = maskEmail(address)
        const maskedAt = masked.lastIndexOf("@")
        expect(masked.slice(maskedAt)).toBe(address.slice(at))
        expect(masked.slice(0, maskedAt)).toBe(`${Array.from(address.slice(0, at))[0] ?? ""}***`)
      }),
      { examples: [["aa@a.aa"], ["ab@ab.ab"]] }
    )
  })
})
