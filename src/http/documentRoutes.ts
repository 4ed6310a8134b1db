/** The pages served beside the API (documents.ts serves them; the edge's route table knows them). */
export const documentPaths = {
  root: "/",
  openapi: "/openapi.json",
  docs: "/docs",
  docsSlash: "/docs/",
  docsScript: "/docs/scalar.js",
  docsStart: "/docs/start.js",
  favicon: "/favicon.ico",
  problems: "/problems",
  problem: "/problems/:code",
  // Probes for orchestrators (probes.ts): outside the contract, never limited.
  livez: "/livez",
  readyz: "/readyz"
} as const

export const documentRoutes: ReadonlyArray<{ readonly path: string; readonly methods: ReadonlyArray<string> }> =
  Object.values(documentPaths).map((path) => ({ path, methods: ["GET", "HEAD"] }))
