/** Whom a request's upstream calls are charged to (handlers.ts `callerOf`). */
import { assert, describe, it } from "@effect/vitest"
import { callerOf } from "../../../src/rates/handlers.ts"

describe("callerOf", () => {
  it("a token's client, else the address as rate limits count it: IPv6 by its /64, IPv4-mapped as IPv4", () => {
    assert.strictEqual(callerOf("svc-all", "198.51.100.1"), "client:svc-all")
    assert.strictEqual(callerOf(undefined, "198.51.100.1"), "ip:198.51.100.1")
    assert.strictEqual(callerOf(undefined, "::ffff:198.51.100.1"), "ip:198.51.100.1")
    const one = callerOf(undefined, "2001:db8:1:2::1")
    assert.strictEqual(callerOf(undefined, "2001:0db8:0001:0002:ffff:1:2:3"), one)
    assert.strictEqual(callerOf(undefined, "2001:DB8:1:2:0:0:0:9"), one)
    assert.notStrictEqual(callerOf(undefined, "2001:db8:1:3::1"), one)
    assert.isUndefined(callerOf(undefined, undefined))
  })
})
