import { request } from "node:http"
import { startTestApp, basic } from "/work/main/test/support/app.ts"
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
const form = { "content-type": "application/x-www-form-urlencoded", authorization: basic("svc-all", "secret-all"), origin: "https://evil.example" }
const cases: Array<[string, string, Record<string, any>, any?]> = [
  ["POST", "/api/%68ealth", {}],
  ["DELETE", "/api/%68ealth", {}],
  ["GET", "/api/v1/exchange%2Drates", {}],
  ["POST", "/api/v1/exchange%2Drates", {"content-type":"application/json"}, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/oauth/%74oken", form, "grant_type=client_credentials"],
  ["POST", "/oauth/token", form, "grant_type=client_credentials"],
  ["GET", "/oauth/%74oken", { origin: "https://evil.example" }],
  ["OPTIONS", "/api/%68ealth", { origin: "https://x", "access-control-request-method": "GET" }],
  ["GET", "/problems/not%5ffound", {}],
  ["GET", "/api/health%2F", {}],
  ["GET", "/api%2Fhealth", {}],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@b.co\",\"locale\":\"en\",\"__proto__\":{}}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@b.co\",\"locale\":\"en\",\"constructor\":{}}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@b.co\",\"locale\":\"EN\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"" + "a".repeat(300) + "@b.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":\"a@b.co\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/json" }, "{\"email\":1,\"locale\":[]}"],
  ["POST", "/api/subscribe", { "content-type": "text/plain" }, "{\"email\":\"a@b.co\",\"locale\":\"en\"}"],
  ["POST", "/api/subscribe", { "content-type": "application/x-www-form-urlencoded" }, "email=a@b.co&locale=en"],
  ["POST", "/api/subscribe", { "content-type": "multipart/form-data; boundary=x" }, "--x\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\na@b.co\r\n--x--\r\n"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "multipart/form-data; boundary=x" }, "--x\r\nContent-Disposition: form-data; name=\"cryptos\"\r\n\r\nBTC\r\n--x--\r\n"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/x-www-form-urlencoded" }, "cryptos=BTC"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[" + Array.from({length:51},()=>"\"BTC\"").join(",") + "]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[" + Array.from({length:3000},()=>"\"X\"").join(",") + "]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"days\":\"7\"}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"BTC\"],\"currency\":null}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "\ufeff{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, " {\"cryptos\":[\"BTC\"]} "],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json" }, "{\"cryptos\":[\"DOWN\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json", authorization: "Bearer x" }, "{\"cryptos\":[\"BTC\"]}"],
  ["POST", "/api/v1/exchange-rates", { "content-type": "application/json", authorization: ["Bearer x", "Bearer y"] }, "{\"cryptos\":[\"BTC\"]}"],
  ["GET", "/api/health", { authorization: "Bearer " + "a".repeat(8000) }],
  ["GET", "/api/health", { authorization: "Bearer \u00e9" }],
  ["GET", "/api/health", { "x-request-id": "../../etc" }],
  ["POST", "/oauth/token", { ...form, "content-type": "application/x-www-form-urlencoded; charset=ISO-8859-1" }, "grant_type=client_credentials"],
  ["POST", "/oauth/token", { "content-type": "application/x-www-form-urlencoded" }, "grant_type=client_credentials&client_id=svc-all&client_secret=secret-all"],
  ["POST", "/oauth/token", { ...form }, "grant_type=client_credentials&grant_type=client_credentials"],
  ["POST", "/oauth/token", { ...form }, "grant_type=client_credentials&scope=rates:read&scope="],
  ["POST", "/oauth/token", { ...form }, "grant_type=client_credentials&scope=%FF"],
  ["POST", "/oauth/token", { ...form }, "grant_type=client_credentials&scope=rates%3Aread"],
  ["POST", "/oauth/token", { ...form }, Buffer.from([0x67,0x72,0x61,0x6e,0x74,0x5f,0x74,0x79,0x70,0x65,0x3d,0xff])],
  ["POST", "/oauth/token", { ...form, "content-type": "application/json" }, "{\"grant_type\":\"client_credentials\"}"],
  ["POST", "/oauth/token", { ...form, "content-type": "text/plain" }, "grant_type=client_credentials"],
  ["POST", "/oauth/token", { ...form, "content-length": "99999" }, "grant_type=client_credentials"],
  ["GET", "/oauth/token", { }],
  ["PUT", "/oauth/token", { }],
]
for (const [m, p, h, b] of cases) {
  try {
    const r = await raw(m, p, h, b)
    console.log(m, p.slice(0, 40), JSON.stringify(h).slice(0, 50), "→", r.status, r.headers["content-type"], "allow=" + (r.headers["allow"] ?? ""), "acao=" + (r.headers["access-control-allow-origin"] ?? ""), r.body.slice(0, 140).replace(/\n/g, " "))
  } catch (e) { console.log(m, p, "→ ERR", String(e)) }
}
await app.close()
