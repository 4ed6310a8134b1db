/**
 * Cluster mode (WEB_CONCURRENCY > 1): the primary forks one server process per worker; they share
 * the listening port through node:cluster and their state (rate limits, rates cache) through Redis,
 * which is therefore required. A worker that dies is replaced; SIGTERM drains every worker, exit 0.
 */
import cluster from "node:cluster"

export const runPrimary = (workers: number) => {
  let stopping = false
  const listening = new Set<number>()
  cluster.on("listening", (worker) => listening.add(worker.id))
  cluster.on("exit", (worker, code) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0)
      return
    }
    // One that never listened failed at start-up (configuration, port): another would fail the same way.
    if (!listening.has(worker.id)) {
      process.stderr.write(`worker ${worker.id} exited with ${code} before listening; stopping\n`)
      stop()
      process.exitCode = 1
      return
    }
    process.stderr.write(`worker ${worker.id} exited with ${code}; starting another\n`)
    cluster.fork()
  })
  const stop = () => {
    if (stopping) return
    stopping = true
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGTERM")
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(process.exitCode ?? 0)
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
  for (let i = 0; i < workers; i++) cluster.fork()
}
