/**
 * docs/cdn.md shows the nginx configuration the CDN test and bench run (test/support/nginx.ts `cachingProxyConfig`):
 * the copy in the document is that configuration, rendered with the document's addresses and paths.
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { cachingProxyConfig } from "../../support/nginx.ts"

describe("docs/cdn.md", () => {
  it("shows the nginx configuration the tests run", () => {
    const doc = readFileSync(new URL("../../../docs/cdn.md", import.meta.url), "utf8")
    const block = /```nginx\n([\s\S]*?)```/.exec(doc)?.[1]
    expect(block).toBe(cachingProxyConfig({
      listen: "80",
      origin: "127.0.0.1:3000",
      cacheDir: "/var/cache/nginx/rates",
      accessLog: "/var/log/nginx/rates-cache.log"
    }))
  })
})
