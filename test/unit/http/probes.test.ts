/**
 * Probes for orchestrators (CONTRACT C3): /livez and /readyz answer, outside the OpenAPI document,
 * never rate-limited, never subject to a token; a failing dependency check makes /readyz a 503 problem.
 */
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Readiness } from "../../../src/lifecycle/Readiness.ts"
import { startTestApp, type TestApp } from "../../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_RATES_PER_MIN: "1", RATE_LIMIT_SUBSCRIBE_PER_MIN: "1" } })
})
afterAll(() => app.close())

describe("/livez and /readyz", () => {
  it("answer 200 with no-store, and HEAD too", async () => {
    for (const [path, status] of [["/livez", "alive"], ["/readyz", "ready"]] as const) {
      const res = await fetch(app.url + path)
      expect(res.status).toBe(200)
      expect(res.headers.get("cache-control")).toBe("no-store")
      expect(await res.json()).toEqual({ status })
      expect((await fetch(app.url + path, { method: "HEAD" })).status).toBe(200)
    }
  })

  it("are never rate-limited and ignore Authorization", async () => {
    const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) =>
      fetch(`${app.url}${i % 2 === 0 ? "/livez" : "/readyz"}`, { headers: { authorization: "Bearer not-a-token" } }).then((r) => r.status)
    ))
    expect(new Set(statuses)).toEqual(new Set([200]))
  })

  it("refuse other methods with 405 and Allow", async () => {
    const res = await fetch(`${app.url}/readyz`, { method: "POST" })
    expect(res.status).toBe(405)
    expect(res.headers.get("allow")).toBe("GET, HEAD")
  })

  it("are not in the OpenAPI document", async () => {
    const doc = await (await fetch(`${app.url}/openapi.json`)).json()
    expect(Object.keys(doc.paths)).not.toContain("/livez")
    expect(Object.keys(doc.paths)).not.toContain("/readyz")
  })
})

describe("Readiness", () => {
  it("reports every failing check, and draining before any check", async () => {
    const outcome = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const readiness = yield* Readiness
      yield* readiness.addCheck("database", Effect.fail("connection refused"))
      yield* readiness.addCheck("cache", Effect.void)
      const failing = yield* readiness.status
      readiness.startDraining()
      return { failing, draining: yield* readiness.status }
    })).pipe(Effect.provide(Layer.fresh(Readiness.layer))))
    expect(outcome.failing).toEqual({ ready: false, reasons: ["database: connection refused"] })
    expect(outcome.draining).toEqual({ ready: false, reasons: ["draining: the process is stopping"] })
  })

  it("counts a check that does not answer within a second as failing", async () => {
    const status = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const readiness = yield* Readiness
      yield* readiness.addCheck("slow", Effect.never)
      return yield* readiness.status
    })).pipe(Effect.provide(Readiness.layer)))
    expect(status).toEqual({ ready: false, reasons: ["slow: no answer within 1 s"] })
  })
})
