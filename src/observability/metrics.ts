/**
 * Prometheus metrics (CONTRACT C9) with Effect's Metric, exposed by a separate listener on
 * METRICS_PORT (off the public port; unset = off). Label values come from closed sets (known route
 * patterns, status codes), so a scan of random paths cannot explode the series count.
 */
import { createServer } from "node:http"
import { Context, Effect, Layer, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"

const requests = Metric.counter("http_requests_total", {
  description: "HTTP requests served, by route pattern, method and status",
  incremental: true
})
const duration = Metric.histogram("http_request_duration_seconds", {
  description: "HTTP request latency, by route pattern and status",
  boundaries: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
})
const rateLimited = Metric.counter("rate_limit_rejections_total", {
  description: "Requests refused with 429, by policy",
  incremental: true
})
const upstreamCalls = Metric.counter("upstream_calls_total", {
  description: "Calls to upstream providers, by upstream and outcome",
  incremental: true
})
const cacheLookups = Metric.counter("cache_lookups_total", {
  description: "Rates cache lookups, by cache and result (hit or miss)",
  incremental: true
})

// Labelled metric instances are built once per label set, not per request: the hot path is one
// Map lookup with a key the caller already has.
const context = Context.empty()
const handles = new Map<string, (value: number) => void>()
const handle = <M extends Metric.Metric<number, any>>(key: string, metric: M, labels: () => Record<string, string>) => {
  let update = handles.get(key)
  if (update === undefined) {
    const labelled = Metric.withAttributes(metric, labels())
    update = (value) => labelled.updateUnsafe(value, context)
    handles.set(key, update)
  }
  return update
}

/** The request metrics of one route pattern, bound per method and status on first use. */
export interface RequestMetrics {
  readonly record: (method: string, status: number, seconds: number) => void
}

const routeMetrics = new Map<string, RequestMetrics>()

/** One per route pattern (the edge's route table keeps it): recording is two lookups, no key built. */
export const requestMetrics = (route: string): RequestMetrics => {
  const existing = routeMetrics.get(route)
  if (existing !== undefined) return existing
  const byStatus = new Map<number, (seconds: number) => void>()
  const byMethodStatus = new Map<string, Map<number, (n: number) => void>>()
  const durationOf = (status: number) => {
    let update = byStatus.get(status)
    if (update === undefined) {
      update = handle(`dur ${route} ${status}`, duration, () => ({ route, status: String(status) }))
      byStatus.set(status, update)
    }
    return update
  }
  const countOf = (method: string, status: number) => {
    let statuses = byMethodStatus.get(method)
    if (statuses === undefined) byMethodStatus.set(method, statuses = new Map())
    let count = statuses.get(status)
    if (count === undefined) {
      count = handle(`req ${route} ${method} ${status}`, requests, () => ({ route, method, status: String(status) }))
      statuses.set(status, count)
    }
    return count
  }
  const metrics: RequestMetrics = {
    record: (method, status, seconds) => {
      countOf(method, status)(1)
      durationOf(status)(seconds)
    }
  }
  routeMetrics.set(route, metrics)
  return metrics
}

/** Requests no route matched (404s of unknown paths): one series, not one per path. */
export const unmatchedMetrics = requestMetrics("unmatched")
export const recordRateLimited = (policy: string) => handle(`rl ${policy}`, rateLimited, () => ({ policy }))(1)
export const recordUpstreamCall = (upstream: string, outcome: string) =>
  handle(`up ${upstream} ${outcome}`, upstreamCalls, () => ({ upstream, outcome }))(1)
export const recordCacheLookup = (cache: string, hit: boolean) =>
  handle(`cache ${cache} ${hit}`, cacheLookups, () => ({ cache, result: hit ? "hit" : "miss" }))(1)

const creditsSpent = Metric.gauge("upstream_credits_spent_month", {
  description: "Credits spent with an upstream this calendar month (UTC), as the shared ledger counts them"
})
const creditsLeft = Metric.gauge("upstream_credits_left_month", {
  description: "The plan's monthly credits less those spent this calendar month (UTC)"
})
const badHistoryDays = Metric.counter("rates_history_bad_days_total", {
  description: "Days read back from the rates history that were no price (tampered with, corrupted): asked of the source again",
  incremental: true
})
const refreshInterval = Metric.gauge("rates_refresh_interval_seconds", {
  description: "How often the latest prices callers ask for are refreshed, as the month's pace allows: the most demanded currency's"
})
const refreshIntervalMax = Metric.gauge("rates_refresh_interval_max_seconds", {
  description: "The longest refresh interval of the latest prices of a currency asked within the demand window"
})

/** The month's credits as the ledger last said (CoinGecko: src/rates/credits). */
export const recordCredits = (upstream: string, spent: number, left: number) => {
  handle(`credits spent ${upstream}`, creditsSpent, () => ({ upstream }))(spent)
  handle(`credits left ${upstream}`, creditsLeft, () => ({ upstream }))(left)
}
/** The refresh intervals of latest prices (coingecko/latestPrices.ts, the refresh pacer): the most demanded unit's, and the longest; no per-currency label. */
export const recordRefreshIntervals = (topSeconds: number, longestSeconds: number) => {
  handle("refresh interval", refreshInterval, () => ({}))(topSeconds)
  handle("refresh interval max", refreshIntervalMax, () => ({}))(longestSeconds)
}
export const recordBadHistoryDays = (source: string, days: number) => handle(`bad history ${source}`, badHistoryDays, () => ({ source }))(days)

const liveFeedConnected = Metric.gauge("rates_live_feed_connected", {
  description: "1 while the live quotes feed (Coinbase Exchange's) is connected and subscribed, else 0"
})
const liveTicks = Metric.counter("rates_live_ticks_total", {
  description: "Trades (ticker messages) read from the live quotes feed",
  incremental: true
})
const livePairs = Metric.gauge("rates_live_pairs", {
  description: "Pairs followed on the live quotes feed, by state (live: a tick or heartbeat within 30 s)"
})
const liveOldestAge = Metric.gauge("rates_live_quote_oldest_age_seconds", {
  description: "Age of the oldest live quote (now less its last trade or heartbeat), over the live pairs"
})

const liveUnreadable = Metric.counter("rates_live_feed_unreadable_total", {
  description: "Messages of the live quotes feed that did not read, by kind (message type and the field that did not read)",
  incremental: true
})
const liveFeedHolder = Metric.gauge("rates_live_feed_holder", {
  description: "1 while this instance holds the deployment's one live quotes feed connection, 0 while it reads the holder's quotes"
})

export const recordLiveFeedConnected = (connected: boolean) => handle("live connected", liveFeedConnected, () => ({}))(connected ? 1 : 0)
/** `kind`: a message type and one of its schema's fields (feedMessages.ts), a closed set. */
export const recordLiveUnreadable = (kind: string) => handle(`live unreadable ${kind}`, liveUnreadable, () => ({ kind }))(1)
export const recordLiveFeedHolder = (holds: boolean) => handle("live holder", liveFeedHolder, () => ({}))(holds ? 1 : 0)
export const recordLiveTick = () => handle("live ticks", liveTicks, () => ({}))(1)
export const recordLivePairs = (live: number, followed: number, oldestAgeSeconds: number) => {
  handle("live pairs live", livePairs, () => ({ state: "live" }))(live)
  handle("live pairs down", livePairs, () => ({ state: "down" }))(followed - live)
  handle("live oldest", liveOldestAge, () => ({}))(oldestAgeSeconds)
}

const liveStreamsOpen = Metric.gauge("live_streams_open", {
  description: "Price streams (server-sent events) open in this process"
})
const liveStreamEvents = Metric.counter("live_stream_events_total", {
  description: "Price events written to price streams (one per stream written to)",
  incremental: true
})
const liveStreamsLagging = Metric.counter("live_streams_closed_lagging_total", {
  description: "Price streams closed because their reader did not keep up (unread bytes past the bound)",
  incremental: true
})
export const recordLiveStreamsOpen = (open: number) => handle("live streams open", liveStreamsOpen, () => ({}))(open)
export const recordLiveStreamEvents = (events: number) => handle("live stream events", liveStreamEvents, () => ({}))(events)
export const recordLiveStreamLagging = () => handle("live streams lagging", liveStreamsLagging, () => ({}))(1)
/** The price streams' series at zero from the start, so that rates and alerts on them work before the first event. */
export const recordLiveStreamsStarted = () => {
  recordLiveStreamsOpen(0)
  recordLiveStreamEvents(0)
  handle("live streams lagging", liveStreamsLagging, () => ({}))(0)
}

export const metricsText = () => PrometheusMetrics.formatUnsafe(Context.empty())

/** A listener that answers GET /metrics on its own port (bind it to a private interface). */
export const MetricsServer = (port: number, host: string) =>
  Layer.effectDiscard(
    Effect.acquireRelease(
      Effect.callback<ReturnType<typeof createServer>>((resume) => {
        const server = createServer((req, res) => {
          if (req.method === "GET" && req.url === "/metrics") {
            res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" })
            res.end(metricsText())
          } else {
            res.writeHead(404, { "content-type": "text/plain" }).end("not found\n")
          }
        })
        server.listen(port, host, () => resume(Effect.succeed(server)))
      }),
      (server) => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
    )
  )
