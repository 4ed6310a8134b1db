/**
 * The providers' client for tests that build the rates or newsletter Layers themselves: the service's
 * own (src/platform/upstreamHttp.ts), so that a test calls the emulators as production calls the
 * providers, with a User-Agent and without trace headers.
 */
import * as UpstreamHttp from "../../src/platform/upstreamHttp.ts"

export const upstreamHttp = UpstreamHttp.layerTest
