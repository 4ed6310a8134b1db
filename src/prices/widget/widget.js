// @ts-check
/**
 * <crypto-prices symbols="BTC,ETH" currency="usd" days="30"> (C10), served by the API as GET /widget.js:
 * per symbol its name, price, 24 h change and a sparkline of the days, from the cacheable
 * GET /api/v1/rates, then live from GET /api/v1/prices/stream. How to embed and theme it: docs/widget.md.
 *
 * Plain JavaScript checked by tsc (JSDoc types), served as written after parts.js, as one module (handlers.ts).
 * It runs in another origin's page, so:
 * no dependency, no innerHTML, no eval, no inline style (styles are a constructed sheet adopted by the
 * shadow root), and every URL it asks is the API's, derived from this module's own URL. It works under
 * `script-src <api>; connect-src <api>`, and with Trusted Types required.
 */

import {
  apiRoot, symbolPattern, maxSymbols, announceEveryMs, largeMove, pausedAfterMs, firstRetryMs, maxRetryMs,
  svgNs, adoptStyles, element, symbolsOf, daysOf, currencyOf, isNumber, retryAfterOf, sparklinePoints
} from "./parts.js"

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
