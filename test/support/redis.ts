/**
 * A private `redis-server` for a test (a port of its own, nothing saved), stopped by the caller; or a Redis that is down,
 * at once or while a test says so.
 * Without redis-server on the PATH it fails at once saying what to install, instead of an
 * uncaught spawn error and a timeout.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as NodeRedis from "@effect/platform-node/NodeRedis"
import { Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import { createClient } from "redis"
import { freePort, onAnotherPortIfTaken } from "./spawn.ts"

export const startRedis = (port: number, extraArgs: ReadonlyArray<string> = []) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...extraArgs], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`redis-server did not start in 10 s: ${out}`))
    }, 10_000)
    child.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      reject(new Error(error.code === "ENOENT"
        ? "redis-server is not installed: run `apt-get install -y redis-server` (npm test does it when run as root)"
        : `redis-server could not be started: ${error.message}`))
    })
    child.stdout!.on("data", (c) => {
      out += c
      if (out.includes("Ready to accept connections")) {
        clearTimeout(timer)
        resolve(child)
      }
    })
    // Ended before it was ready (its port taken, a bad argument): said at once, with what it printed.
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`redis-server exited (${code}) before it was ready: ${out}`))
    })
  })

/** A private redis-server on a port free when picked, picked again when it was taken first (`onAnotherPortIfTaken`). */
export const startRedisOnFreePort = (extraArgs: ReadonlyArray<string> = []): Promise<{ readonly child: ChildProcess; readonly port: number }> =>
  onAnotherPortIfTaken(async () => {
    const port = await freePort()
    return { child: await startRedis(port, extraArgs), port }
  }, /Address already in use/)

/** Sends one command to the Redis on `port` (PING, KEYS, SHUTDOWN...) with the `redis` client, and resolves with its reply. */
export const redisCommand = async (port: number, ...args: ReadonlyArray<string>) => {
  const client = createClient({ socket: { host: "127.0.0.1", port, reconnectStrategy: false }, disableOfflineQueue: true })
  client.on("error", () => {})
  await client.connect()
  try {
    return await client.sendCommand([...args])
  } finally {
    client.destroy()
  }
}

/** A Redis that refuses every command, as one that is down does (no offline queue): an outage within a test. */
export const refusingRedis = Layer.succeed(Redis.Redis)(Redis.Redis.of({
  send: () => Effect.fail(new Redis.RedisError({ cause: new Error("connection refused") })),
  eval: () => () => Effect.fail(new Redis.RedisError({ cause: new Error("connection refused") })),
  subscribe: () => Effect.die("not used: pub/sub"),
  reserve: Effect.die("not used: reserved connections")
}))

/** The Redis provided, each command passed through `around` (answered late, refused): a Redis as a test has it misbehave. */
export const aroundRedis = (around: <A>(command: Effect.Effect<A, Redis.RedisError>) => Effect.Effect<A, Redis.RedisError>) =>
  Layer.effect(Redis.Redis, Effect.map(Effect.service(Redis.Redis), (redis) =>
    Redis.Redis.of({
      ...redis,
      send: (command, ...args) => around(redis.send(command, ...args)),
      eval: (script) => {
        const run = redis.eval(script)
        return (...params) => around(run(...params))
      }
    })))

/** The machine's Redis (REDIS_URL), refusing every command while `outage.on`, as one that went down does. */
export const refusingWhile = (outage: { on: boolean }) =>
  aroundRedis((command) => Effect.suspend(() => outage.on ? Effect.fail(new Redis.RedisError({ cause: new Error("connection refused") })) : command))
    .pipe(Layer.provide(NodeRedis.layer({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" })))
