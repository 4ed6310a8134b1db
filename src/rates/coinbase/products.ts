/**
 * Coinbase's product list, held as a list (copies/Copies.ts `makeHeldList`) reloaded on its schedule, never on a request's behalf.
 * An empty list, or one missing most majors held, is Coinbase's fault: a failed reload (list kept, `productsRetryMs` back-off).
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import type { CopyStore } from "../copies/CopyStore.ts"
import { makeHeldList } from "../copies/Copies.ts"
import { curatedCoins } from "../symbols.ts"
import { type SourceError, spendingUntil } from "../upstream.ts"
import { CoinbaseClient, type CoinbaseClientShape, type CoinbaseProduct } from "./CoinbaseClient.ts"
import { CoinbaseConfig, type CoinbaseConfigShape } from "./CoinbaseConfig.ts"

const PRODUCTS = "rates:v2:coinbase-products"
const Products = Schema.Array(Schema.Struct({ id: Schema.String, base: Schema.String, quote: Schema.String }))
/** The pairs a landing page needs most: curated coins (symbols.ts) quoted in USD or EUR. */
export const majorsOf = (list: ReadonlyArray<CoinbaseProduct>): ReadonlyArray<string> =>
  list.filter((p) => curatedCoins.has(p.base) && (p.quote === "USD" || p.quote === "EUR")).map((p) => p.id)
/** Whether a fresh list may replace the one held: not when empty, nor when it keeps under half of the majors held. */
const acceptList = (fresh: ReadonlyArray<CoinbaseProduct>, held: ReadonlyArray<CoinbaseProduct> | undefined): true | string => {
  if (fresh.length === 0) return "an empty product list"
  const before = held === undefined ? [] : majorsOf(held)
  const listed = new Set(fresh.map((p) => p.id))
  const kept = before.filter((id) => listed.has(id)).length
  return kept * 2 >= before.length ? true : `the list lost ${before.length - kept} of the ${before.length} major pairs held at once`
}

export const makeProducts = (client: CoinbaseClientShape, config: CoinbaseConfigShape) =>
  Effect.gen(function*() {
    const products = yield* makeHeldList<ReadonlyArray<CoinbaseProduct>>({
      name: "Coinbase product list",
      source: "coinbase",
      key: PRODUCTS,
      value: Products,
      load: client.products,
      // Coinbase lists and delists pairs rarely: a list held serves, whatever its age, while it is reloaded.
      reload: { everyMs: config.productsRefreshMs, lastGoodMs: Duration.toMillis(Duration.days(7)) },
      retry: { firstMs: config.productsRetryMs },
      accept: acceptList
    })
    yield* Effect.forkScoped(products.reloads)

    const lookups = new WeakMap<ReadonlyArray<CoinbaseProduct>, ReadonlyMap<string, CoinbaseProduct>>()
    const lookupOf = (list: ReadonlyArray<CoinbaseProduct>) => {
      let lookup = lookups.get(list)
      if (lookup === undefined) lookups.set(list, lookup = new Map(list.map((p) => [`${p.base}-${p.quote}`, p])))
      return lookup
    }
    /** The list held, else the first load waited for until the `Spend` deadline; `Unavailable` without one. */
    const list = products.get
    const heldNow = Effect.flatMap(Clock.currentTimeMillis, (now) => list.pipe(spendingUntil(now))).pipe(Effect.orElseSucceed(() => undefined))
    const key = (base: string, quote: string) => `${base.toUpperCase()}-${quote.toUpperCase()}`

    return {
      list,
      /** The list held now (a new array once reloaded), or undefined while none is. */
      held: heldNow,
      /** The product quoting `base` in `quote` (any case), or undefined when Coinbase does not list it. */
      productFor: (base: string, quote: string): Effect.Effect<CoinbaseProduct | undefined, SourceError> =>
        Effect.map(list, (held) => lookupOf(held).get(key(base, quote))),
      /** The same from the list held now, never waiting: undefined also while no list is held. */
      productHeld: (base: string, quote: string): Effect.Effect<CoinbaseProduct | undefined> =>
        Effect.map(heldNow, (held) => held === undefined ? undefined : lookupOf(held).get(key(base, quote)))
    }
  })

export class CoinbaseProducts extends Context.Service<CoinbaseProducts, Effect.Success<ReturnType<typeof makeProducts>>>()("app/rates/CoinbaseProducts") {
  static readonly layer: Layer.Layer<CoinbaseProducts, never, CoinbaseClient | CoinbaseConfig | CopyStore> = Layer.effect(
    CoinbaseProducts,
    Effect.flatMap(Effect.all([CoinbaseClient, CoinbaseConfig]), ([client, config]) => makeProducts(client, config))
  )
}
