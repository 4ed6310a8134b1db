import { request } from "node:http"
import { startTestApp } from "/work/main/test/support/app.ts"

const app = await startTestApp()
const port = Number(new URL(app.url).port)
const raw = (method: string, path: string, headers: Record<string, string | string[]>, body?: Buffer | string) =>
  new Promise<{ status: number; headers: any; body: string }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }))
    })
    req.on("error", reject)
    if (body !== undefined) req.end(body)
    else req.end()
  })
const cases: Array<[string, string, Record<string, any>, any?]> = [
  ["GET", "/api/health/", {}],
  ["GET", "/API/health", {}],
  ["GET", "//api/health", {}],
  ["GET", "/api/./health", {}],
  ["GET", "/api/../api/health", {}],
  ["GET", "/api/%68ealth", {}],
  ["GET", "/api/health%00", {}],
  ["GET", "/api/health%", {}],
  ["GET", "/api/health%zz", {}],
  ["GET", "/api/health?x=%", {}],
  ["GET", "/problems/%", {}],
  ["GET", "/problems/%E0%A4%A", {}],
  ["GET", "/problems/..%2f", {}],
  ["GET", "*", {}],
  ["GET", "http://evil/api/health", {}],
  ["FOO", "/api/health", {}],
  ["PROPFIND", "/api/health", {}],
  ["CONNECT", "/api/health", {}],
  ["TRACE", "/api/health", {}],
  ["GET", "/api/health", { authorization: "Bearer" }],
  ["GET", "/api/health", { authorization: "Bearer " }],
  ["GET", "/api/health", { authorization: "bearer abc" }],
  ["GET", "/api/health", { authorization: "Basic abc" }],
  ["GET", "/api/health", { authorization: "" }],
  ["GET", "/api/health", { authorization: "Bearer a.b.c" }],
  ["GET", "/api/health", { authorization: "Bearer eyJhbGciOiJub25lIn0.e30." }],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"cryptos\":[\"ETH\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"\\ud800\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"__proto__\":{\"x\":1}}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "[" .repeat(5000) + "]".repeat(5000)],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"x\":" + "[".repeat(5000) + "]".repeat(5000) + "}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, ""],
  ["POST", "/api/v1/exchange-rates", {}, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json", "content-encoding": "gzip" }, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json; charset=latin1" }, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/JSON" }, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/vnd.api+json" }, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": ["application/json", "text/plain"] }, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"days\":1e400}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"days\":3.0}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"currency\":\"xyz\"}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "null"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "\"str\""],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json", "content-length": "abc" }, "{}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@b.co\",\"locale\":\"en\",\"email\":\"x\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a\\u0000@b.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"\\ud800@b.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@\\ud800.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@b\u202e.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@😀.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@xn--.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@-.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@a..co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@" + "a".repeat(240) + ".co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@" + "ä".repeat(60) + ".co\",\"locale\":\"en\"}"],
  ["POST", "/oauth/token", { "content-type": "application/json" }, "{\"grant_type\":\"client_credentials\"}"],
  ["POST", "/oauth/token", { "content-type": "application/x-www-form-urlencoded", "transfer-encoding": "chunked" }, "x=" + "a".repeat(20000)],
  ["POST", "/oauth/token", { "content-type": "application/x-www-form-urlencoded", authorization: "Basic %%%" }, "grant_type=client_credentials"],
  ["POST", "/oauth/token", { "content-type": "application/x-www-form-urlencoded", authorization: "Basic " + Buffer.from("svc-all:secret-all").toString("base64") }, "grant_type=client_credentials&scope=%ZZ"],
  ["POST", "/oauth/token", { "content-type": "application/x-www-form-urlencoded", authorization: "Basic " + Buffer.from([0xff, 0x3a, 0x41]).toString("base64") }, "grant_type=client_credentials"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json", "transfer-encoding": "chunked" }, "{\"cryptos\":[\"BTC\"],\"x\":\"" + "a".repeat(20000) + "\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json", "transfer-encoding": "chunked" }, "{\"cryptos\":[\"BTC\"],\"x\":\"" + "a".repeat(20000) + "\"}"],
  ["GET", "/api/health", { "x-big": "a".repeat(17000) }],
  ["GET", "/api/health", { "x-request-id": "AAAAAAAA-AAAA-AAAA-AAAA-AAAAAAAAAAAA" }],
  ["GET", "/api/health", { "origin": "null" }],
  ["OPTIONS", "/api/health", { origin: "https://x", "access-control-request-method": "GET" }],
  ["OPTIONS", "*", {}],
  ["HEAD", "/nope", {}],
  ["HEAD", "/api/subscribe", {}],
  ["GET", "/docs/", {}],
  ["GET", "/problems/", {}],
]
for (const [m, p, h, b] of cases) {
  try {
    const r = await raw(m, p, h, b)
    console.log(m, p.slice(0, 40), JSON.stringify(h).slice(0, 60), "→", r.status, r.headers["content-type"], r.headers["allow"] ?? "", r.body.slice(0, 160).replace(/\n/g, " "))
  } catch (e) { console.log(m, p, "→ ERR", String(e)) }
}
await app.close()
