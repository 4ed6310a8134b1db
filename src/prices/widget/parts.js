// @ts-check
/**
 * The widget's parts that need no element (C10): its style sheet, how it reads its attributes and formats
 * figures, where it asks. GET /widget.js serves this file and widget.js as one module (handlers.ts joins them).
 */

/**
 * The API's root: the folder the served module was loaded from (its origin, and a path prefix if the API has
 * one): every URL the widget asks is relative to it.
 */
export const apiRoot = new URL(".", import.meta.url)

/** C4's rules for symbols; a symbol that breaks them is shown as unknown rather than failing the whole query. */
export const symbolPattern = /^[A-Za-z0-9._-]{1,32}$/
export const maxSymbols = 50
/** At most one announcement a symbol this often, unless it moved by `largeMove` since the last one. */
export const announceEveryMs = 30_000
export const largeMove = 0.02
/** A stream reconnecting this long is shown as paused (EventSource retries on its own, quickly). */
export const pausedAfterMs = 5_000
/** Retries of a failed load or a refused stream: this, doubled each time, at most `maxRetryMs`. */
export const firstRetryMs = 15_000
export const maxRetryMs = 300_000

export const svgNs = "http://www.w3.org/2000/svg"

const css = `
:host { display: block; box-sizing: border-box; font: var(--crypto-prices-font, inherit);
  color: var(--crypto-prices-color, inherit); background: var(--crypto-prices-background, transparent);
  border: var(--crypto-prices-border, 1px solid rgb(128 128 128 / 0.35)); border-radius: var(--crypto-prices-radius, 0.5rem);
  padding: var(--crypto-prices-padding, 0.5rem 0.75rem); }
:host([hidden]) { display: none; }
ul { list-style: none; margin: 0; padding: 0; display: grid; gap: var(--crypto-prices-gap, 0.5rem); }
li { display: grid; grid-template-columns: minmax(6rem, 1fr) auto 5.5rem var(--crypto-prices-sparkline-width, 6rem);
  align-items: center; column-gap: 0.75rem; border-radius: 0.25rem; }
.name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.symbol, .muted { color: var(--crypto-prices-muted, inherit); opacity: 0.7; font-weight: 400; font-size: 0.85em; }
.price, .change { font-variant-numeric: tabular-nums; text-align: end; white-space: nowrap; }
.up { color: var(--crypto-prices-up, #15803d); }
.down { color: var(--crypto-prices-down, #b91c1c); }
svg { display: block; width: 100%; height: var(--crypto-prices-sparkline-height, 1.75rem); overflow: visible; }
polyline { fill: none; stroke: var(--crypto-prices-sparkline, currentColor); stroke-width: var(--crypto-prices-sparkline-stroke, 1.5);
  stroke-linejoin: round; stroke-linecap: round; vector-effect: non-scaling-stroke; }
.paused .price { opacity: 0.6; }
footer { margin-top: 0.4rem; font-size: 0.75em; }
footer p { margin: 0; color: var(--crypto-prices-muted, inherit); opacity: 0.75; }
footer p:empty { display: none; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
@media (prefers-reduced-motion: no-preference) {
  .flash-up { animation: crypto-prices-up 1s ease-out; }
  .flash-down { animation: crypto-prices-down 1s ease-out; }
}
@keyframes crypto-prices-up { from { background-color: var(--crypto-prices-flash-up, rgb(22 163 74 / 0.2)); } }
@keyframes crypto-prices-down { from { background-color: var(--crypto-prices-flash-down, rgb(220 38 38 / 0.2)); } }
`

/** One sheet for every instance: constructed, so no `style-src` is needed; a `<style>` where unsupported. */
let sharedSheet = /** @type {CSSStyleSheet | undefined} */ (undefined)
/** @param {ShadowRoot} root */
export const adoptStyles = (root) => {
  if ("adoptedStyleSheets" in root && typeof CSSStyleSheet === "function" && "replaceSync" in CSSStyleSheet.prototype) {
    if (sharedSheet === undefined) {
      sharedSheet = new CSSStyleSheet()
      sharedSheet.replaceSync(css)
    }
    root.adoptedStyleSheets = [sharedSheet]
    return
  }
  const style = document.createElement("style")
  style.textContent = css
  root.append(style)
}

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {{ class?: string, part?: string, text?: string }} [options]
 * @returns {HTMLElementTagNameMap[K]}
 */
export const element = (tag, options = {}) => {
  const made = document.createElement(tag)
  if (options.class !== undefined) made.className = options.class
  if (options.part !== undefined) made.setAttribute("part", options.part)
  if (options.text !== undefined) made.textContent = options.text
  return made
}

/** @param {string | null} value @returns {Array<string>} upper-cased, de-duplicated, order kept */
export const symbolsOf = (value) => [...new Set((value ?? "").split(",").map((s) => s.trim().toUpperCase()).filter((s) => s !== ""))]

/** @param {string | null} value */
export const daysOf = (value) => {
  const days = Number(value ?? "30")
  return Number.isInteger(days) && days >= 1 && days <= 365 ? days : 30
}

/** @param {string | null} value */
export const currencyOf = (value) => {
  const currency = (value ?? "usd").trim().toLowerCase()
  return /^[a-z]{2,10}$/.test(currency) ? currency : "usd"
}

/** @param {unknown} value @returns {value is number} */
export const isNumber = (value) => typeof value === "number" && Number.isFinite(value)

/** @param {Response} response @returns {number | undefined} milliseconds, from Retry-After in seconds */
export const retryAfterOf = (response) => {
  const seconds = Number(response.headers.get("retry-after"))
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, maxRetryMs) : undefined
}

/** @param {ReadonlyArray<readonly [number, number]>} points @returns {string} the polyline's points in a 100 × 32 box */
export const sparklinePoints = (points) => {
  if (points.length === 0) return ""
  const times = points.map((p) => p[0])
  const values = points.map((p) => p[1])
  const [t0, t1] = [Math.min(...times), Math.max(...times)]
  const [low, high] = [Math.min(...values), Math.max(...values)]
  const x = (/** @type {number} */ t) => (t1 === t0 ? 50 : ((t - t0) / (t1 - t0)) * 100)
  const y = (/** @type {number} */ v) => (high === low ? 16 : 30 - ((v - low) / (high - low)) * 28)
  const drawn = points.length === 1 ? [points[0], [points[0][0] + 1, points[0][1]]] : points
  return drawn.map(([t, v]) => `${x(t).toFixed(2)},${y(v).toFixed(2)}`).join(" ")
}
