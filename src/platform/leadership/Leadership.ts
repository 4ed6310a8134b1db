/**
 * One holder of a role among the instances of a deployment, and a channel between them: for what a
 * provider allows once per address, not once per process (Coinbase's feed: a connection, and its
 * messages, counted per address; docs/upstreams.md §4). The holder does the work and
 * publishes what it learns; the others read it and tell the holder what they need.
 *
 * Implementations: `Leadership.layerAlone` below (one process, no shared store: it always holds, and
 * what it publishes reaches no one else), redis.ts (REDIS_URL: a lease and pub/sub). The server chooses
 * with the rest of what Redis shares (src/server.ts).
 */
import { type Cause, Context, Effect, Layer, Queue, type Scope } from "effect"

export interface LeadershipShape {
  /**
   * Runs `lead` while this instance holds the role `name`, `follow` while another does, switching (the
   * running one interrupted) as the role moves, for as long as the scope lasts. While the shared store
   * is away, every instance leads: each does the work alone, as without a store.
   */
  readonly run: <R>(name: string, roles: { readonly lead: Effect.Effect<void, never, R>; readonly follow: Effect.Effect<void, never, R> }) => Effect.Effect<void, never, R | Scope.Scope>
  /** Sends `message` to every instance listening on `channel` (this one too); lost while the store is away. */
  readonly publish: (channel: string, message: string) => Effect.Effect<void>
  /** What is published on `channel` from now on, for as long as the scope lasts; ends when the store goes away. */
  readonly listen: (channel: string) => Effect.Effect<Queue.Dequeue<string, Cause.Done>, never, Scope.Scope>
}

export class Leadership extends Context.Service<Leadership, LeadershipShape>()("app/Leadership") {
  /** One process: it always leads; nothing published reaches another. */
  static readonly layerAlone: Layer.Layer<Leadership> = Layer.succeed(Leadership)({
    run: (_name, roles) => Effect.asVoid(Effect.forkScoped(Effect.andThen(roles.lead, Effect.never))),
    publish: () => Effect.void,
    listen: () => Queue.unbounded<string, Cause.Done>()
  })
}
