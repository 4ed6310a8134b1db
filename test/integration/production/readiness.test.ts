/**
 * /readyz while the process drains after SIGTERM (CONTRACT C3, C9): a probe arriving on a connection
 * already open gets a 503 problem, the in-flight request still completes, and the process exits 0.
 */
import { connect, type Socket } from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { type ServiceProcess, spawnService } from "../../support/spawn.ts"

const running: Array<ServiceProcess> = []
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop("SIGKILL")))
})

/** A raw connection that has sent `text`; `received()` is what came back so far. */
const openWith = (port: number, text: string) =>
  new Promise<Socket & { received: () => string }>((resolve, reject) => {
    let received = ""
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(text)
      resolve(Object.assign(socket, { received: () => received }))
    })
    socket.on("data", (c) => (received += c))
    socket.once("error", reject)
  })

describe("/readyz during the drain", () => {
  it("is 503 while a slow request is in flight; that request completes; exit 0", async () => {
    const service = await spawnService({})
    running.push(service)
    expect((await fetch(`${service.url}/readyz`)).status).toBe(200)
    const body = JSON.stringify({ email: "ada@example.com", locale: "en" })
    // In flight: the headers are in, the body trickles.
    const slow = await openWith(service.port, `POST /api/subscribe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`)
    // A load balancer's probe, half sent on its open connection.
    const probe = await openWith(service.port, "GET /readyz HTTP/1.1\r\nHost: x\r\n")
    await new Promise((r) => setTimeout(r, 300))

    const exit = service.stop("SIGTERM")
    await new Promise((r) => setTimeout(r, 500))
    probe.write("\r\n")
    await expect.poll(() => probe.received(), { timeout: 5_000 }).toMatch(/\r\n\r\n\{.*\}$/s)
    expect(probe.received()).toMatch(/^HTTP\/1\.1 503 /)
    expect(probe.received()).toMatch(/^connection: close\r$/im)
    probe.end()
    const problem = JSON.parse(probe.received().split("\r\n\r\n")[1]!)
    expect(problem).toMatchObject({ status: 503, code: "service_unavailable", detail: expect.stringMatching(/draining/) })

    slow.write(body.slice(5))
    await expect.poll(() => slow.received(), { timeout: 5_000 }).toMatch(/^HTTP\/1\.1 200 /)
    slow.end()
    expect(await exit).toBe(0)
  })
})
