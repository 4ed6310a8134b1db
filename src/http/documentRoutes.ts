/** The pages served beside the API (documents.ts serves them; the edge's route table knows them). */
export const documentPaths = {
  openapi: "/openapi.json",
  docs: "/docs",
  problem: "/problems/:code",
  // Probes for orchestrators (probes.ts): outside the contract, never limited.
  livez: "/livez",
  readyz: "/readyz"
} as const

export const documentRoutes: ReadonlyArray<{ readonly path: string; readonly methods: ReadonlyArray<string> }> =
  Object.values(documentPaths).map((path) => ({ path, methods: ["GET", "HEAD"] }))
