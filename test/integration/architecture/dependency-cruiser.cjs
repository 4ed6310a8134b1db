/**
 * The import rules of src/ (checked by test/integration/architecture/imports.test.ts, part of npm test):
 * no import circles, and no import from a lower layer up to a higher one.
 *
 * The layers, lowest first. A file may import its own layer's files and those of the layers listed
 * before it, never those after it; the capabilities never import one another.
 */
const layers = [
  // The contract: HttpApi, problem classes, schemas; also the typed client's (no server code).
  ["api", "^src/api/"],
  // Configuration through Effect's Config, and its ConfigInvalid.
  ["config", "^src/config/"],
  // Metrics, the JSON logger and access log.
  ["observability", "^src/observability/"],
  // The process as operators see it: why a start-up stops (StartupFailure), whether it can serve (Readiness).
  ["lifecycle", "^src/lifecycle/"],
  // PostgreSQL for every capability: the one pool, the migrations.
  ["database", "^src/database/"],
  // Building blocks of no one capability (files, reloading file, LRU, durable cells on files, Redis, PostgreSQL).
  ["platform", "^src/platform/"],
  // Start-up failures as one line for operators (the server's listener reports through it).
  ["startup", "^src/startup[.]ts$"],
  // Cross-cutting HTTP: edge, server, limits, documents; capabilities only through its ports (ReadyAnswers, BearerCheck).
  ["http", "^src/http/"],
  // The capabilities, side by side: none imports another.
  ["capabilities", "^src/(health|rates|prices|oauth|newsletter)/"],
  // Composition and entrypoints (app, server, main, cluster, redis, checkConfiguration, client, cli): anything below.
  ["top", "^src/(cli/|client/|(?!startup[.]ts$)[^/]+[.]ts$)"]
]

const any = (patterns) => `(${patterns.join("|")})`
const capability = "^src/(health|rates|prices|oauth|newsletter)/"

/** For each layer but the top one: nothing from the layers above it. */
const upward = layers.slice(0, -1).map(([name, path], i) => ({
  name: `${name}-imports-upward`,
  severity: "error",
  comment: `${name} sits below ${layers.slice(i + 1).map(([above]) => above).join(", ")}: it must not import them`,
  from: { path },
  to: { path: any(layers.slice(i + 1).map(([, above]) => above)) }
}))

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "An import circle, type-only imports included: split the shared part into a file both import",
      from: { path: "^src/" },
      to: { circular: true }
    },
    ...upward,
    {
      name: "capability-imports-capability",
      severity: "error",
      comment: "Capabilities are independent: share through a lower layer, or compose them at the top (server.ts, app.ts)",
      from: { path: capability },
      to: { path: capability, pathNot: "^src/$1/" }
    },
    {
      name: "not-in-a-layer",
      severity: "error",
      comment: "Every file of src belongs to a layer: add its folder to the list at the top of this file",
      from: { path: "^src/", pathNot: any(layers.map(([, path]) => path)) },
      to: {}
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // TypeScript 7 has no JavaScript API for dependency-cruiser: swc parses every module instead,
    // and type-only imports count (they make circles for the reader as much as value imports do).
    parser: "swc",
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "types", "default"],
      mainFields: ["module", "main", "types"]
    }
  }
}
