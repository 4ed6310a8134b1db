/** Configuration for a test: an explicit environment instead of the process's (Effect's ConfigProvider swapped). */
import { ConfigProvider, Layer } from "effect"

export const configFrom = (env: Readonly<Record<string, string | undefined>>): Layer.Layer<never> =>
  ConfigProvider.layer(ConfigProvider.fromEnv({ env: Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<string, string> }))
