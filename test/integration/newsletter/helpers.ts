/**
 * Runs the live `Newsletter` layer built from an explicit environment (never the process's), over a
 * real HTTP client, and measures how long each call takes.
 */
import { Effect, Exit, Layer, Logger, ManagedRuntime } from "effect"
import { configFrom, type Env } from "../../support/config.ts"
import * as Newsletters from "../../../src/newsletter/layer.ts"
import { Locales, Newsletter, type SubscribeInput } from "../../../src/newsletter/Newsletter.ts"
import { upstreamHttp } from "../../support/upstream.ts"

export const LOCALES = Locales

const liveLayer = (env: Env) =>
  Newsletters.layer.pipe(
    Layer.provide(upstreamHttp),
    Layer.provide(configFrom(env))
  )

export interface LiveNewsletter {
  /** The outcome, or the failure's `_tag` and `reason`, plus the elapsed milliseconds. */
  readonly subscribe: (input: SubscribeInput) => Promise<Attempt>
  /** JSON log lines the layer emitted so far, from its construction on. */
  readonly logs: () => ReadonlyArray<string>
  readonly dispose: () => Promise<void>
}

type Attempt =
  | { readonly ok: true; readonly outcome: string; readonly ms: number }
  | { readonly ok: false; readonly tag: string; readonly reason: string; readonly ms: number }

/** Builds the layer once (as the server would) and keeps it for several calls. */
export const liveNewsletter = async (env: Env): Promise<LiveNewsletter> => {
  const lines: Array<string> = []
  const collector = Logger.make((options) => {
    lines.push(String(Logger.formatJson.log(options)))
  })
  // Provided to the layer as well, so that what it logs while it is built is collected too.
  const runtime = ManagedRuntime.make(liveLayer(env).pipe(Layer.provideMerge(Logger.layer([collector]))))
  await runtime.runPromise(Effect.void)
  return {
    subscribe: async (input) => {
      const started = performance.now()
      const exit = await runtime.runPromiseExit(Newsletter.use((n) => n.subscribe(input)))
      const ms = performance.now() - started
      if (Exit.isSuccess(exit)) return { ok: true, outcome: exit.value, ms }
      const error = exit.cause.reasons.find((r) => r._tag === "Fail")
      if (error === undefined || error._tag !== "Fail") throw new Error(`unexpected cause: ${String(exit.cause)}`)
      const e = error.error
      return { ok: false, tag: e._tag, reason: "reason" in e ? e.reason : e.message, ms }
    },
    logs: () => [...lines],
    dispose: () => runtime.dispose()
  }
}

/** Builds the layer and reports the construction failure's message, or undefined if it succeeded. */
export const buildError = async (env: Env): Promise<string | undefined> => {
  const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(liveLayer(env))))
  if (Exit.isSuccess(exit)) return undefined
  const fail = exit.cause.reasons.find((r) => r._tag === "Fail")
  return fail !== undefined && fail._tag === "Fail" ? fail.error.message : String(exit.cause)
}
