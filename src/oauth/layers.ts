/**
 * Transitional: the old name of `OAuth.layer` (OAuth.ts), kept only until src/server.ts imports `OAuth`.
 * Delete this file then.
 */
import { OAuth } from "./OAuth.ts"

/** @deprecated use `OAuth.layer` from ./OAuth.ts */
export const OAuthLive = OAuth.layer
