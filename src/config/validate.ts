/**
 * Moved to src/checkConfiguration.ts, above the capabilities whose groups it reads. This forwarding
 * file stays only for test/rates/coinbase-config.test.ts (src/rates is being redesigned): once that
 * test imports src/checkConfiguration.ts, delete this file and its `exclude` in .dependency-cruiser.cjs.
 */
export { validateConfiguration } from "../checkConfiguration.ts"
