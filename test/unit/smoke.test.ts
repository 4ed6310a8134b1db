import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { readAppConfig } from "../../src/config/AppConfig.ts"
import { configFrom } from "../support/config.ts"

describe("config", () => {
  it("names every bad variable", async () => {
    const exit = await Effect.runPromiseExit(readAppConfig.pipe(Effect.provide(configFrom({ PORT: "x", TRUST_PROXY: "maybe" }))))
    expect(exit._tag).toBe("Failure")
    expect(String(JSON.stringify(exit))).toContain("PORT")
  })
})
