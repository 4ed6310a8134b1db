// @ts-check
/**
 * <crypto-prices symbols="BTC,ETH" currency="usd" days="30"> (C10), served by the API as GET /widget.js:
 * per symbol its name, price, 24 h change and a sparkline of the days, from the cacheable
 * GET /api/v1/rates, then live from GET /api/v1/prices/stream. How to embed and theme it: docs/widget.md.
 *
 * Plain JavaScript checked by tsc (JSDoc types), served as written. It runs in another origin's page, so:
 * no dependency, no innerHTML, no eval, no inline style (styles are a constructed sheet adopted by the
 * shadow root), and every URL it asks is the API's, derived from this module's own URL. It works under
 * `script-src <api>; connect-src <api>`, and with Trusted Types required.
 */

/**
 * @typedef {{ readonly symbol: string, readonly name: string, readonly price: number,
 *   readonly change: { readonly "24h": number | null }, readonly series: ReadonlyArray<readonly [number, number]> }} Rate
 * @typedef {{ readonly currency: string, readonly rates: ReadonlyArray<Rate>,
 *   readonly unknown?: ReadonlyArray<string>, readonly attribution?: string }} RatesAnswer
 * @typedef {{ readonly symbol: string, readonly price: number, readonly change24h: number | null,
 *   readonly at: string, readonly source: string }} LivePrice
 * @typedef {{ readonly currency: string, readonly prices: ReadonlyArray<LivePrice> }} Snapshot
 * @typedef {{ readonly title?: string, readonly detail?: string, readonly code?: string,
 *   readonly unknown?: ReadonlyArray<string> }} Problem
 * @typedef {{ readonly item: HTMLLIElement, readonly name: string, readonly price: HTMLElement,
 *   readonly change: HTMLElement, readonly line: SVGPolylineElement, readonly series: ReadonlyArray<readonly [number, number]>,
 *   value: number, change24h: number | null, live: readonly [number, number] | undefined,
 *   announced: { readonly at: number, readonly price: number } }} Row
 */

/** The API's root: the folder this module was loaded from (its origin, and a path prefix if the API has one). */
const apiRoot = new URL(".", import.meta.url)

/** C4's rules for symbols; a symbol that breaks them is shown as unknown rather than failing the whole query. */
const symbolPattern = /^[A-Za-z0-9._-]{1,32}$/
const maxSymbols = 50
/** At most one announcement a symbol this often, unless it moved by `largeMove` since the last one. */
const announceEveryMs = 30_000
const largeMove = 0.02
/** A stream reconnecting this long is shown as paused (EventSource retries on its own, quickly). */
const pausedAfterMs = 5_000
/** Retries of a failed load or a refused stream: this, doubled each time, at most `maxRetryMs`. */
const firstRetryMs = 15_000
const maxRetryMs = 300_000

const svgNs = "http://www.w3.org/2000/svg"

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
const adoptStyles = (root) => {
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
const element = (tag, options = {}) => {
  const made = document.createElement(tag)
  if (options.class !== undefined) made.className = options.class
  if (options.part !== undefined) made.setAttribute("part", options.part)
  if (options.text !== undefined) made.textContent = options.text
  return made
}

/** @param {string | null} value @returns {Array<string>} upper-cased, de-duplicated, order kept */
const symbolsOf = (value) => [...new Set((value ?? "").split(",").map((s) => s.trim().toUpperCase()).filter((s) => s !== ""))]

/** @param {string | null} value */
const daysOf = (value) => {
  const days = Number(value ?? "30")
  return Number.isInteger(days) && days >= 1 && days <= 365 ? days : 30
}

/** @param {string | null} value */
const currencyOf = (value) => {
  const currency = (value ?? "usd").trim().toLowerCase()
  return /^[a-z]{2,10}$/.test(currency) ? currency : "usd"
}

/** @param {unknown} value @returns {value is number} */
const isNumber = (value) => typeof value === "number" && Number.isFinite(value)

/** @param {Response} response @returns {number | undefined} milliseconds, from Retry-After in seconds */
const retryAfterOf = (response) => {
  const seconds = Number(response.headers.get("retry-after"))
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, maxRetryMs) : undefined
}

/** @param {ReadonlyArray<readonly [number, number]>} points @returns {string} the polyline's points in a 100 × 32 box */
const sparklinePoints = (points) => {
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

export class CryptoPrices extends HTMLElement {
  static observedAttributes = ["symbols", "currency", "days"]

  /** @type {ShadowRoot} */ #root
  /** @type {HTMLUListElement} */ #list
  /** @type {HTMLElement} */ #status
  /** @type {HTMLElement} */ #note
  /** @type {HTMLElement} */ #attribution
  /** @type {HTMLElement} */ #announcer
  /** @type {Map<string, Row>} */ #rows = new Map()
  /** Aborts what the current load started (its fetch, its stream, its timers). */
  /** @type {AbortController | undefined} */ #loading
  /** @type {EventSource | undefined} */ #source
  /** @type {Array<string>} */ #pendingAnnouncements = []
  /** @type {ReturnType<typeof setTimeout> | undefined} */ #announceTimer
  /** Symbols the attribute names that C4 would refuse: shown as unknown, never asked. */
  /** @type {Array<string>} */ #malformed = []
  #reloadQueued = false
  #retryMs = firstRetryMs

  constructor() {
    super()
    this.#root = this.attachShadow({ mode: "open" })
    adoptStyles(this.#root)
    this.#list = element("ul", { part: "list" })
    this.#list.setAttribute("role", "list")
    const footer = element("footer")
    this.#status = element("p", { class: "status", part: "status" })
    this.#note = element("p", { class: "note", part: "note" })
    this.#attribution = element("p", { class: "attribution", part: "attribution" })
    footer.append(this.#status, this.#note, this.#attribution)
    // Polite, and written to only by #announce: prices change every second, a reader hears a few of them.
    this.#announcer = element("div", { class: "visually-hidden" })
    this.#announcer.setAttribute("aria-live", "polite")
    this.#announcer.setAttribute("aria-atomic", "true")
    this.#root.append(this.#list, footer, this.#announcer)
  }

  connectedCallback() {
    this.#queueReload()
  }

  disconnectedCallback() {
    this.#stop()
  }

  attributeChangedCallback() {
    if (this.isConnected) this.#queueReload()
  }

  /** Several attributes set in a row make one load. */
  #queueReload() {
    if (this.#reloadQueued) return
    this.#reloadQueued = true
    queueMicrotask(() => {
      this.#reloadQueued = false
      if (this.isConnected) this.#load()
    })
  }

  #stop() {
    this.#loading?.abort()
    this.#loading = undefined
    this.#source?.close()
    this.#source = undefined
    clearTimeout(this.#announceTimer)
    this.#announceTimer = undefined
    this.#pendingAnnouncements = []
  }

  get #currency() {
    return currencyOf(this.getAttribute("currency"))
  }

  get #locale() {
    return this.closest("[lang]")?.getAttribute("lang") || undefined
  }

  /** @param {number} value */
  #formatPrice(value) {
    const digits = Math.abs(value) >= 1 ? { minimumFractionDigits: 2, maximumFractionDigits: 2 } : { maximumSignificantDigits: 4 }
    try {
      return new Intl.NumberFormat(this.#locale, { style: "currency", currency: this.#currency.toUpperCase(), ...digits }).format(value)
    } catch {
      // Not an ISO 4217 code (CoinGecko quotes in btc, eth, sats...): the number and the code.
      return `${new Intl.NumberFormat(this.#locale, digits).format(value)} ${this.#currency.toUpperCase()}`
    }
  }

  /** @param {number | null} change a percentage */
  #formatChange(change) {
    if (change === null) return "–"
    return new Intl.NumberFormat(this.#locale, {
      style: "percent", signDisplay: "exceptZero", minimumFractionDigits: 2, maximumFractionDigits: 2
    }).format(change / 100)
  }

  #load() {
    this.#stop()
    const loading = new AbortController()
    this.#loading = loading
    const requested = symbolsOf(this.getAttribute("symbols"))
    const symbols = requested.filter((s) => symbolPattern.test(s)).slice(0, maxSymbols)
    this.#malformed = requested.filter((s) => !symbols.includes(s))
    this.#rows.clear()
    this.#list.replaceChildren()
    this.#showUnknown([])
    this.#attribution.textContent = ""
    if (symbols.length === 0) {
      this.#status.textContent = "No symbols to show."
      return
    }
    this.#status.textContent = "Loading prices…"
    void this.#fetchRates(symbols, loading.signal)
  }

  /**
   * The initial figures: GET /api/v1/rates, a cacheable read (C4 "Cacheable reads"), in one spelling per
   * set of symbols (sorted) so that every page asking the same set shares one cache entry.
   * @param {ReadonlyArray<string>} symbols @param {AbortSignal} signal
   */
  async #fetchRates(symbols, signal) {
    const url = new URL("api/v1/rates", apiRoot)
    url.search = `cryptos=${[...symbols].sort().join(",")}&currency=${this.#currency}&days=${daysOf(this.getAttribute("days"))}`
    /** @type {number | undefined} */
    let retryIn
    try {
      const response = await fetch(url, { signal, headers: { accept: "application/json" }, credentials: "omit" })
      if (response.ok) {
        this.#render(symbols, /** @type {RatesAnswer} */ (await response.json()))
        this.#retryMs = firstRetryMs
        this.#openStream(symbols, signal)
        return
      }
      const problem = /** @type {Problem} */ (await response.json().catch(() => ({})))
      this.#status.textContent = this.#describe(response.status, problem)
      // A 4xx other than 429 is this page's to fix (its attributes): asking again would get the same.
      if (response.status === 429 || response.status >= 500) retryIn = retryAfterOf(response) ?? this.#retryMs
    } catch {
      if (signal.aborted) return
      this.#status.textContent = "Prices unavailable (no connection to the price service)."
      retryIn = this.#retryMs
    }
    if (retryIn !== undefined && !signal.aborted) {
      this.#retryMs = Math.min(this.#retryMs * 2, maxRetryMs)
      const timer = setTimeout(() => void this.#fetchRates(symbols, signal), retryIn)
      signal.addEventListener("abort", () => clearTimeout(timer), { once: true })
    }
  }

  /** @param {number} status @param {Problem} problem */
  #describe(status, problem) {
    if (problem.code === "no_valid_symbols") return `No known symbol: ${(problem.unknown ?? []).join(", ")}.`
    const title = typeof problem.title === "string" ? problem.title : `Error ${status}`
    return status === 429 || status >= 500 ? `Prices unavailable: ${title}. Retrying later.` : `Prices unavailable: ${title}.`
  }

  /** @param {ReadonlyArray<string>} symbols @param {RatesAnswer} answer */
  #render(symbols, answer) {
    const bySymbol = new Map(answer.rates.map((rate) => [rate.symbol, rate]))
    const now = Date.now()
    const days = daysOf(this.getAttribute("days"))
    for (const symbol of symbols) {
      const rate = bySymbol.get(symbol)
      if (rate === undefined || !isNumber(rate.price)) continue
      const item = element("li", { part: "row" })
      item.dataset.symbol = symbol
      const name = element("span", { class: "name", part: "name", text: rate.name })
      name.append(" ", element("span", { class: "symbol", text: symbol }))
      const price = element("span", { class: "price", part: "price" })
      const change = element("span", { class: "change", part: "change" })
      const svg = document.createElementNS(svgNs, "svg")
      svg.setAttribute("part", "sparkline")
      svg.setAttribute("viewBox", "0 0 100 32")
      svg.setAttribute("preserveAspectRatio", "none")
      svg.setAttribute("role", "img")
      const line = document.createElementNS(svgNs, "polyline")
      svg.append(line)
      item.append(name, price, change, svg)
      this.#list.append(item)
      const series = (rate.series ?? []).filter((p) => isNumber(p[0]) && isNumber(p[1]))
      /** @type {Row} */
      const row = {
        item, name: rate.name, price, change, line, series,
        value: rate.price, change24h: rate.change?.["24h"] ?? null, live: undefined,
        announced: { at: now, price: rate.price }
      }
      this.#rows.set(symbol, row)
      this.#show(row)
      if (series.length > 0) {
        svg.setAttribute("aria-label", `${days}-day trend of ${rate.name}: from ${this.#formatPrice(series[0][1])} to ${this.#formatPrice(rate.price)}`)
      }
    }
    this.#showUnknown(answer.unknown ?? [])
    this.#attribution.textContent = answer.attribution ?? ""
    this.#status.textContent = ""
  }

  /** @param {ReadonlyArray<string>} unknown what the API did not know */
  #showUnknown(unknown) {
    const all = [...this.#malformed, ...unknown]
    this.#note.textContent = all.length === 0 ? "" : `Unknown: ${all.join(", ")}`
  }

  /** @param {Row} row */
  #show(row) {
    row.price.textContent = this.#formatPrice(row.value)
    const change = row.change24h
    row.change.textContent = this.#formatChange(change)
    row.change.append(element("span", { class: "visually-hidden", text: " in 24 hours" }))
    row.change.classList.toggle("up", change !== null && change > 0)
    row.change.classList.toggle("down", change !== null && change < 0)
    row.line.setAttribute("points", sparklinePoints(row.live === undefined ? row.series : [...row.series, row.live]))
  }

  /**
   * The live part: the stream of C10, fed by the feed's ticks. EventSource reconnects by itself (the
   * server's `retry:`) and gets a new snapshot; a refused stream (a problem answer) closes it, and it is
   * opened again later.
   * @param {ReadonlyArray<string>} symbols @param {AbortSignal} signal
   */
  #openStream(symbols, signal) {
    if (typeof EventSource !== "function" || signal.aborted) return
    const url = new URL("api/v1/prices/stream", apiRoot)
    url.search = `cryptos=${[...symbols].sort().join(",")}&currency=${this.#currency}`
    const source = new EventSource(url)
    this.#source = source
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let pausedTimer
    const paused = (/** @type {boolean} */ on) => {
      this.#list.classList.toggle("paused", on)
      this.#status.textContent = on ? "Live updates paused; reconnecting…" : ""
    }
    source.addEventListener("open", () => {
      clearTimeout(pausedTimer)
      pausedTimer = undefined
      this.#retryMs = firstRetryMs
      paused(false)
    })
    source.addEventListener("snapshot", (event) => {
      const snapshot = /** @type {Snapshot | undefined} */ (this.#parse(event))
      if (snapshot === undefined || snapshot.currency.toLowerCase() !== this.#currency) return
      for (const price of snapshot.prices) this.#update(price)
    })
    source.addEventListener("price", (event) => {
      const price = /** @type {LivePrice | undefined} */ (this.#parse(event))
      if (price !== undefined) this.#update(price)
    })
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (a 4xx or 5xx problem, not an event stream): quietly again later, prices as last shown.
        source.close()
        clearTimeout(pausedTimer)
        pausedTimer = undefined
        paused(true)
        const timer = setTimeout(() => this.#openStream(symbols, signal), this.#retryMs)
        this.#retryMs = Math.min(this.#retryMs * 2, maxRetryMs)
        signal.addEventListener("abort", () => clearTimeout(timer), { once: true })
        return
      }
      pausedTimer ??= setTimeout(() => paused(true), pausedAfterMs)
    })
    signal.addEventListener("abort", () => {
      clearTimeout(pausedTimer)
      source.close()
    }, { once: true })
  }

  /** @param {Event} event @returns {unknown} the event's JSON data, undefined when it is not JSON */
  #parse(event) {
    try {
      return JSON.parse(/** @type {MessageEvent<string>} */ (event).data)
    } catch {
      return undefined
    }
  }

  /** @param {LivePrice} price */
  #update(price) {
    const row = this.#rows.get(price.symbol)
    if (row === undefined || !isNumber(price.price)) return
    const at = Date.parse(price.at)
    const previous = row.value
    row.value = price.price
    if (isNumber(price.change24h)) row.change24h = price.change24h
    row.live = [Number.isFinite(at) ? at : Date.now(), price.price]
    row.item.dataset.at = price.at
    row.item.dataset.source = price.source
    this.#show(row)
    if (price.price !== previous) this.#flash(row.item, price.price > previous ? "flash-up" : "flash-down")
    this.#announce(row)
  }

  /** A brief tint of the row (CSS: only without prefers-reduced-motion). @param {HTMLElement} item @param {string} name */
  #flash(item, name) {
    item.classList.remove("flash-up", "flash-down")
    void item.offsetWidth // restarts the animation
    item.classList.add(name)
  }

  /**
   * Tells screen readers, politely, at most once per symbol every 30 s, or at once on a move of 2 % since
   * the last announcement; what several symbols announce within a second is said in one message.
   * @param {Row} row
   */
  #announce(row) {
    const now = Date.now()
    const { at, price } = row.announced
    if (row.value === price) return
    const moved = Math.abs(row.value - price) / price
    if (now - at < announceEveryMs && moved < largeMove) return
    row.announced = { at: now, price: row.value }
    const change = row.change24h === null ? "" : `, ${this.#formatChange(row.change24h)} in 24 hours`
    this.#pendingAnnouncements.push(`${row.name} ${this.#formatPrice(row.value)}${change}`)
    this.#announceTimer ??= setTimeout(() => {
      this.#announcer.textContent = this.#pendingAnnouncements.join(". ")
      this.#pendingAnnouncements = []
      this.#announceTimer = undefined
    }, 1_000)
  }
}

if (customElements.get("crypto-prices") === undefined) customElements.define("crypto-prices", CryptoPrices)
