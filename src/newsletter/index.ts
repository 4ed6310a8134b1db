/** The newsletter capability: what the HTTP layer and the entrypoint import. */
export * from "./Newsletter.ts"
export { MAX_EMAIL_LENGTH, maskEmail, validateEmail } from "./email.ts"
export {
  type BrevoSettings,
  type CallPolicy,
  type ListmonkSettings,
  NewsletterConfig,
  type NewsletterConfigShape,
  type NewsletterProviderName,
  NewsletterProviders,
  readNewsletterConfig
} from "./NewsletterConfig.ts"
export { NewsletterLayer, NewsletterLive } from "./layer.ts"
export { NewsletterMemory } from "./memory.ts"
export { readSubscribers, type Subscriber, subscribersPath } from "./local.ts"
export { subscribersCsv } from "./csv.ts"
