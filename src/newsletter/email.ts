/**
 * E-mail address validation and normalisation for POST /api/subscribe (CONTRACT C5, docs/upstreams.md §8).
 *
 * The verdict is `validator`'s `isEmail` with the "practical address" options; no regex of our own
 * decides validity. The extra checks below only pick a specific, human-readable reason for a
 * rejection (the HTTP layer puts it in the `validation_failed` problem at pointer /email), and the
 * normalisation converts an internationalised domain to ASCII so every provider sees the same form.
 */
import { domainToASCII } from "node:url"
import { Result } from "effect"
import validator from "validator"

/** RFC 5321 §4.5.3.1 gives a 256-octet path including the angle brackets: 254 for the address. */
const MAX_EMAIL_LENGTH = 254
/** RFC 5321 §4.5.3.1.1. */
const MAX_LOCAL_PART_OCTETS = 64

const isEmailOptions: validator.IsEmailOptions = {
  allow_display_name: false,
  require_display_name: false,
  require_tld: true,
  allow_ip_domain: false,
  // SMTPUTF8 support among e-mail providers is uneven, so a non-ASCII local part is refused politely.
  allow_utf8_local_part: false
}

const utf8Length = (s: string): number => Buffer.byteLength(s, "utf8")
const isAscii = (s: string): boolean => validator.isAscii(s)

/**
 * Validates and normalises a submitted address: trimmed, at most 254 characters, accepted by
 * `isEmail` (no display name, TLD required, no IP domain, ASCII local part); the domain converted to
 * ASCII (punycode) and lower-cased; the local part's case kept (it is significant per RFC 5321).
 *
 * Success carries the normalised address; failure carries the reason, a sentence for the caller.
 */
export const validateEmail = (input: unknown): Result.Result<string, string> => {
  if (typeof input !== "string") return Result.fail("must be a string")
  if (input.length > MAX_EMAIL_LENGTH) {
    return Result.fail(`must be at most ${MAX_EMAIL_LENGTH} characters long`)
  }
  const value = input.trim()
  if (value === "") return Result.fail("must not be empty")
  // A lone UTF-16 surrogate is no character at all; validator's isEmail would throw on it (encodeURI).
  if (/\p{Cs}/u.test(value)) return Result.fail("must not contain unpaired surrogate code units")
  if (!validator.isEmail(value, isEmailOptions)) return Result.fail(reasonFor(value))

  // isEmail accepted it, so there is exactly one unquoted "@" or a quoted local part before the last one.
  const at = value.lastIndexOf("@")
  const local = value.slice(0, at)
  const domain = value.slice(at + 1)
  if (local.startsWith("\"")) {
    // Legal in RFC 5321 but not a practical address: providers and mail clients handle it poorly.
    return Result.fail("must not use a quoted local part (\"...\"@)")
  }
  // UTS #46 processing: maps case and compatibility characters, converts to punycode, and returns
  // "" for a domain that cannot be represented (e.g. a malformed xn-- label).
  const asciiDomain = domainToASCII(domain).toLowerCase()
  if (asciiDomain === "") return Result.fail("has a domain that is not a valid internationalised domain name")
  const normalised = `${local}@${asciiDomain}`
  if (normalised.length > MAX_EMAIL_LENGTH) {
    return Result.fail(`must be at most ${MAX_EMAIL_LENGTH} characters long once the domain is converted to ASCII`)
  }
  // The converted form is what providers receive, so it must pass the same check on its own.
  if (!validator.isEmail(normalised, isEmailOptions)) {
    return Result.fail("has a domain that is not valid once converted to ASCII")
  }
  return Result.succeed(normalised)
}

/**
 * Picks the most specific explanation for an address `isEmail` rejected. Order matters: the first
 * matching explanation is the one a person would fix first.
 */
const reasonFor = (value: string): string => {
  if (/[<>]/.test(value)) return "must be a bare address without a display name (e.g. name@example.com)"
  if (/\s/.test(value)) return "must not contain spaces or line breaks"
  const at = value.lastIndexOf("@")
  if (at < 0) return "must contain an @ sign (e.g. name@example.com)"
  const local = value.slice(0, at)
  const domain = value.slice(at + 1)
  if (local === "") return "must have a local part before the @ sign"
  if (domain === "") return "must have a domain after the @ sign"
  if (local.includes("@") && !local.startsWith("\"")) return "must contain a single @ sign"
  if (domain.startsWith("[") || validator.isIP(domain)) return "must use a domain name, not an IP address"
  if (!isAscii(local)) return "must use only ASCII characters before the @ sign"
  if (utf8Length(local) > MAX_LOCAL_PART_OCTETS) {
    return `must have at most ${MAX_LOCAL_PART_OCTETS} characters before the @ sign`
  }
  if (!domain.includes(".")) return "must have a domain with a top-level domain (e.g. example.com)"
  if (!validator.isFQDN(domain, { require_tld: true, allow_underscores: false })) {
    return "has a domain that is not a valid domain name"
  }
  return "is not a valid e-mail address"
}

/**
 * Masks an address for log lines (CONTRACT C9): the first character of the local part stays, the
 * rest becomes "***", the domain stays (it helps diagnose provider-side problems and identifies
 * nobody on its own). Anything without an "@" is masked entirely.
 */
export const maskEmail = (email: string): string => {
  const at = email.lastIndexOf("@")
  if (at < 0) return "***"
  const first = Array.from(email.slice(0, at))[0] ?? ""
  return `${first}***@${email.slice(at + 1)}`
}
