/**
 * Headless Chromium for the browser tests (the /docs page, the widget on another origin's page): Debian's
 * package driven by playwright-core, offline (no background networking, no component updates).
 */
import { existsSync } from "node:fs"
import { type Browser, chromium } from "playwright-core"

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

/** Launches Chromium, or throws with the command that installs it. */
export const launchChromium = (): Promise<Browser> => {
  if (!existsSync(chromiumPath)) {
    throw new Error(`Chromium not found at ${chromiumPath}: run \`apt-get install -y chromium\` (npm test does it when run as root) or set CHROMIUM_PATH`)
  }
  return chromium.launch({
    executablePath: chromiumPath,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
  })
}
