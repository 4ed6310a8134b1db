import { expect } from "vitest"

export const BASE = "https://api.example.test"
const c7Members = ["type", "title", "status", "detail", "instance", "code", "resolution"] as const

/** Asserts a C7 problem: media type, every member, `status` = HTTP status, no internals. */
export const expectProblem = async (res: Response, status: number, code: string) => {
  expect(res.status).toBe(status)
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/)
  expect(res.headers.get("x-content-type-options")).toBe("nosniff")
  expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
  const text = await res.text()
  const body = JSON.parse(text) as Record<string, unknown>
  for (const member of c7Members) expect(body, `member ${member}`).toHaveProperty(member)
  expect(body.type).toBe(`${BASE}/problems/${code}`)
  expect(body.status).toBe(status)
  expect(body.code).toBe(code)
  expect(body.instance).toBe(`urn:uuid:${res.headers.get("x-request-id")}`)
  expect(text).not.toMatch(/node_modules|\.ts:\d+|\bat [\w.]+ \(|Error:/)
  return body
}
