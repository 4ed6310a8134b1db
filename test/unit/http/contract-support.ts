/**
 * Shared set-up of the contract tests (contract-*.test.ts): one test app per file (fakes behind, over real HTTP),
 * started and closed by `useContractApp`'s hooks, and a JSON POST to it.
 */
import { afterAll, beforeAll } from "vitest"
import { startTestApp, type TestApp } from "../../support/app.ts"

/** The file's app, started by `useContractApp`'s beforeAll. */
export let app: TestApp

/** Starts the file's app before its tests and closes it after them. */
export const useContractApp = () => {
  beforeAll(async () => {
    app = await startTestApp()
  })
  afterAll(() => app.close())
}

export const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(app.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })
