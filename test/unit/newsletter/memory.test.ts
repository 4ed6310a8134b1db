import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { NewsletterMemory } from "../../../src/newsletter/memory.ts"
import { Newsletter } from "../../../src/newsletter/Newsletter.ts"

const run = <A, E>(effect: Effect.Effect<A, E, Newsletter | NewsletterMemory>) =>
  Effect.runPromise(effect.pipe(Effect.provide(NewsletterMemory.layer)))

describe("NewsletterMemory (fake for HTTP tests)", () => {
  it("pending, then existing for the same address; records every input", async () => {
    const [first, second, other, inputs] = await run(Effect.gen(function*() {
      const newsletter = yield* Newsletter
      const memory = yield* NewsletterMemory
      const first = yield* newsletter.subscribe({ email: "a@example.com", locale: "es" })
      const second = yield* newsletter.subscribe({ email: "a@example.com", locale: "fr" })
      const other = yield* newsletter.subscribe({ email: "b@example.com", locale: "en" })
      return [first, second, other, yield* memory.inputs] as const
    }))
    expect([first, second, other]).toEqual(["pending", "existing", "pending"])
    expect(inputs).toEqual([
      { email: "a@example.com", locale: "es" },
      { email: "a@example.com", locale: "fr" },
      { email: "b@example.com", locale: "en" }
    ])
  })

  it("local part \"invalid\" → NewsletterInvalidEmail, \"down\" → NewsletterUpstreamError, both recorded", async () => {
    const [invalid, down, inputs] = await run(Effect.gen(function*() {
      const newsletter = yield* Newsletter
      const invalid = yield* Effect.flip(newsletter.subscribe({ email: "invalid@example.com", locale: "it" }))
      const down = yield* Effect.flip(newsletter.subscribe({ email: "down@example.com", locale: "pt" }))
      return [invalid, down, yield* (yield* NewsletterMemory).inputs] as const
    }))
    expect(invalid._tag).toBe("NewsletterInvalidEmail")
    expect(down._tag).toBe("NewsletterUpstreamError")
    expect(inputs.map((i) => i.email)).toEqual(["invalid@example.com", "down@example.com"])
  })

  it("clear forgets inputs and addresses; each layer build starts empty", async () => {
    const outcome = await run(Effect.gen(function*() {
      const newsletter = yield* Newsletter
      const memory = yield* NewsletterMemory
      yield* newsletter.subscribe({ email: "a@example.com", locale: "es" })
      yield* memory.clear
      expect(yield* memory.inputs).toEqual([])
      return yield* newsletter.subscribe({ email: "a@example.com", locale: "es" })
    }))
    expect(outcome).toBe("pending")
    const fresh = await Effect.runPromise(
      Newsletter.use((n) => n.subscribe({ email: "a@example.com", locale: "es" })).pipe(
        Effect.provide(Layer.fresh(NewsletterMemory.layer))
      )
    )
    expect(fresh).toBe("pending")
  })
})
