/** Configuration for a test: an explicit environment instead of the process's (Effect's ConfigProvider swapped). */
import { ConfigProvider, Layer } from "effect"

/** Variables as a test writes them; `undefined` means unset. */
export type Env = Readonly<Record<string, string | undefined>>

export const configFrom = (env: Env): Layer.Layer<never> =>
  ConfigProvider.layer(ConfigProvider.fromEnv({ env: Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<string, string> }))
