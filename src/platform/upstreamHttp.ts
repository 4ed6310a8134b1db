/**
 * How this service calls the providers (CONTRACT C9, "Calls to providers"): one HTTP client and one
 * WebSocket constructor for every upstream (CoinGecko, Coinbase REST and feed, Brevo, Listmonk), made
 * here once, so that no adapter can forget what every call must carry:
 *   - a descriptive `User-Agent` (`UPSTREAM_USER_AGENT`): CoinGecko answers 403 to a call without one,
 *     Coinbase 400, and Node's undici client sends none (its WebSocket only "node");
 *   - no trace headers: `traceparent` and `b3` go to our own collector (OTLP), never to a third party.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import { Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { Socket } from "effect/socket"
import { AppConfig } from "../config/AppConfig.ts"

/** The undici client with the identity on every request and the trace context kept at home. */
const httpClientFor = (userAgent: string): Layer.Layer<HttpClient.HttpClient> =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, (client) =>
      client.pipe(
        HttpClient.mapRequest(HttpClientRequest.setHeader("user-agent", userAgent)),
        HttpClient.transformResponse(Effect.provideService(HttpClient.TracerPropagationEnabled, false))
      ))
  ).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** Node's WebSocket with the identity on the upgrade request (the browser API takes no headers; Node's does). */
const webSocketFor = (userAgent: string): Layer.Layer<Socket.WebSocketConstructor> =>
  Layer.effect(
    Socket.WebSocketConstructor,
    Effect.map(Socket.WebSocketConstructor, (make) => (url: string, options?: Socket.WebSocketConstructorOptions) => {
      const own = options === undefined || typeof options === "string" || Array.isArray(options) ? { protocols: options } : options
      return make(url, { ...own, headers: { ...own.headers, "user-agent": userAgent } })
    })
  ).pipe(Layer.provide(NodeSocket.layerWebSocketConstructor))

export type Upstream = HttpClient.HttpClient | Socket.WebSocketConstructor

/** Both, for the given identity. */
export const layerFor = (userAgent: string): Layer.Layer<Upstream> => Layer.merge(httpClientFor(userAgent), webSocketFor(userAgent))

/** Both, with `UPSTREAM_USER_AGENT` (or its default) from the configuration. */
export const layer: Layer.Layer<Upstream, never, AppConfig> = Layer.unwrap(Effect.map(AppConfig, (config) => layerFor(config.upstreamUserAgent)))

/** Both, with a test's identity (the emulators, like the providers, refuse a call without one). */
export const layerTest: Layer.Layer<Upstream> = layerFor("crypto-landing-api/test (+http://localhost)")
