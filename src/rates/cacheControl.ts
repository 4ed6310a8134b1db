/**
 * How long browsers and shared caches may keep a 200 of GET /api/v1/rates (C4 "Cacheable reads"),
 * derived from what the answer holds (answer.ts `freshUntil`: a second for live quotes, until the next
 * due refresh of CoinGecko's prices for the others; closed days never change, so the series never
 * shortens it):
 * - `max-age`: until the answer stops holding, in whole seconds rounded up (a live answer: 1), at most
 *   an hour; an answer already past it (one repeated while it is rebuilt) is 0, which caches do not keep.
 * - `stale-while-revalidate`: as long again, at least 5 s (a rebuild's time) and at most a minute: a
 *   cache answers at once while one request fetches the next answer.
 * - `stale-if-error`: as long as the service itself serves last-good copies when its sources fail
 *   (COINGECKO_STALE_TTL_H), at most a day: a cache keeps answering through an outage of ours.
 * - An answer made of last-good copies (`freshUntil` 0, `stale: true` in the body) is kept 5 s: long
 *   enough that an outage costs the origin one request per query and cache every 5 s, short enough
 *   that the first fresh answer replaces it at once.
 */

const maxAgeCapS = 3_600
const minRevalidateS = 5
const maxRevalidateS = 60
const staleAnswerS = 5
const maxStaleIfErrorS = 86_400

/** The Cache-Control of an answer holding until `freshUntil` (epoch ms; 0: last-good copies), sent at `now`. */
export const cacheControlFor = (freshUntil: number, now: number, lastGoodSeconds: number): string => {
  const staleIfError = Math.min(maxStaleIfErrorS, Math.max(0, Math.floor(lastGoodSeconds)))
  if (freshUntil === 0) return `public, max-age=${staleAnswerS}, stale-while-revalidate=0, stale-if-error=${staleIfError}`
  const maxAge = Math.min(maxAgeCapS, Math.max(0, Math.ceil((freshUntil - now) / 1000)))
  const revalidate = Math.min(maxRevalidateS, Math.max(minRevalidateS, maxAge))
  return `public, max-age=${maxAge}, stale-while-revalidate=${revalidate}, stale-if-error=${staleIfError}`
}
