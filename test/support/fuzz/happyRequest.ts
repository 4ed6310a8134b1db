/** The fuzz surface and the contract's method matrix: what each operation answers 200 to. */
import { basic } from "../app.ts"

/** A request every operation answers 200 to (anonymous, fakes behind). */
export const happyRequest = (path: string, method: string): { headers: Array<[string, string]>; body?: string } => {
  if (method !== "POST") return { headers: [] }
  if (path === "/api/v1/exchange-rates") return { headers: [["Content-Type", "application/json"]], body: '{"cryptos":["BTC"]}' }
  if (path === "/api/subscribe") return { headers: [["Content-Type", "application/json"]], body: '{"email":"paths@example.com","locale":"en"}' }
  if (path === "/oauth/token") {
    return {
      headers: [["Content-Type", "application/x-www-form-urlencoded"], ["Authorization", basic("svc-all", "secret-all")]],
      body: "grant_type=client_credentials"
    }
  }
  return { headers: [] }
}
