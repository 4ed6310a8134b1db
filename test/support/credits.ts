/**
 * COINGECKO_CALLS_PER_MONTH for tests about lifetimes of a second or two, faults and bursts: credits
 * aplenty, so that the month's pace never sets the refresh interval (src/rates/coingecko/latestPrices.ts) nor
 * refuses a call. Tests of the month itself use the plan's figures.
 */
export const PLENTY = "1000000000"
