/**
 * Shared set-up of the Coinbase feed emulator's tests (coinbase-feed-*.test.ts): one emulator per file on fast
 * cadences (ticks every 100 ms), its feed back to normal and its stats reset before each test, every client
 * closed after it, and a feed client that keeps what it received.
 */
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest"
import { type CoinbaseEmulator, startCoinbaseEmulator } from "../../emulators/coinbase.ts"
import { EMULATOR_NOW } from "../../support/rates.ts"

export const TICK_MS = 100
export const HEARTBEAT_MS = 150
export const DEADLINE_MS = 300
export const AGENT = "crypto-landing-api/test (+http://localhost)"

/** The file's emulator, started by `useFeedEmulator`'s beforeAll. */
export let emulator: CoinbaseEmulator
const opened: Array<WebSocket> = []
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/**
 * The clock the feed's limits per address count by: real time, or held at `heldAt` while a test of those limits says so,
 * so that a burst is one instant however slowly a busy machine sends it.
 */
let heldAt: number | undefined
const limitsClock = () => heldAt ?? performance.now()
/** Holds the feed's limits clock at `at` until the test ends. */
export const holdLimitsClock = (at: number) => {
  heldAt = at
}

/** Starts the file's emulator and registers the hooks that give each test a normal feed and no client left open. */
export const useFeedEmulator = () => {
  beforeAll(async () => {
    emulator = await startCoinbaseEmulator({ now: EMULATOR_NOW, feed: { tickEveryMs: TICK_MS, heartbeatEveryMs: HEARTBEAT_MS, subscribeDeadlineMs: DEADLINE_MS, limitsClock } })
  })
  afterAll(() => emulator.close())
  beforeEach(() => {
    emulator.setFeed("normal")
    emulator.setNow(EMULATOR_NOW)
    emulator.resetStats()
  })
  afterEach(async () => {
    heldAt = undefined
    for (const ws of opened.splice(0)) ws.close()
    while (emulator.stats().feed.connections > 0) await sleep(5)
  })
}

interface Received {
  readonly at: number
  readonly message: any
}

/** A feed client: every message received (with its arrival time), and how it closed. */
export const connect = (url = emulator.wsUrl) =>
  new Promise<{ ws: WebSocket; received: Array<Received>; closed: Promise<CloseEvent>; send: (m: unknown) => void; of: (type: string, id?: string) => Array<any> }>((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { "user-agent": AGENT } } as unknown as Array<string>)
    opened.push(ws)
    const received: Array<Received> = []
    const closed = new Promise<CloseEvent>((done) => ws.addEventListener("close", done))
    ws.onmessage = (event) => received.push({ at: performance.now(), message: JSON.parse(String(event.data)) })
    ws.onerror = () => reject(new Error("not connected"))
    ws.onopen = () =>
      resolve({
        ws,
        received,
        closed,
        send: (m) => ws.send(typeof m === "string" ? m : JSON.stringify(m)),
        of: (type, id) => received.map((r) => r.message).filter((m) => m.type === type && (id === undefined || m.product_id === id))
      })
  })

/** Waits until `test` holds (polling), or fails after `ms`. */
export const until = async (test: () => boolean, ms = 1_000) => {
  const end = performance.now() + ms
  while (!test()) {
    if (performance.now() > end) throw new Error("condition not met in time")
    await sleep(5)
  }
}

/** A subscribe message, as Coinbase takes it. */
export const subscribe = (product_ids: Array<string>, channels: Array<unknown>) => ({ type: "subscribe", product_ids, channels })
