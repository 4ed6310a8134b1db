/**
 * A private nginx (Debian's package) as a caching proxy in front of the service, for the tests and the bench
 * of GET /api/v1/rates behind a CDN: its own directory (configuration, cache, temp files, logs, pid), a port of
 * its own (picked again when another process took it first), stopped by the caller. `cachingProxyConfig` is
 * the configuration docs/cdn.md shows; `test/unit/architecture/cdn-doc.test.ts` keeps the two the same.
 * Without nginx installed it fails at once saying what to install (npm test installs it when run as root).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort, onAnotherPortIfTaken } from "./spawn.ts"

/** Debian installs nginx in /usr/sbin, which is not on every PATH. */
export const nginxPath = process.env.NGINX_PATH ?? (existsSync("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx")

export interface CachingProxyOptions {
  /** Where nginx listens, e.g. `127.0.0.1:8080` (a CDN: its edge). */
  readonly listen: string
  /** The service, e.g. `127.0.0.1:3000`. */
  readonly origin: string
  /** The cache's directory. */
  readonly cacheDir: string
  /** The access log, one line per visit with whether the cache answered it. */
  readonly accessLog: string
}

/**
 * The `http` block's part that puts a cache in front of the service: the service's Cache-Control decides what is
 * kept and for how long, one entry per URL as visitors spell it (whichever origin server answered it); one
 * request per expired entry goes to the service (cache lock), in the background while the answer's own
 * stale-while-revalidate lets the others get the stale copy (not `updating`, which would serve it however old);
 * a failing service's stale copies are served (error ... http_504); an expired entry is revalidated with its
 * ETag (a 304 costs the service no body); the service's Date is passed on, so a browser behind counts the time
 * the answer already spent in this cache; the visitor's address is appended to X-Forwarded-For, which the
 * service reads with TRUST_PROXY naming this proxy.
 */
export const cachingProxyConfig = (options: CachingProxyOptions): string => `proxy_cache_path ${options.cacheDir} levels=1:2 keys_zone=rates:10m max_size=100m inactive=1d use_temp_path=off;
log_format cache '$remote_addr [$time_iso8601] "$request" $status $upstream_cache_status $upstream_status';

server {
    listen ${options.listen};
    access_log ${options.accessLog} cache;

    location /api/ {
        proxy_pass http://${options.origin};
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_pass_header Date;

        proxy_cache rates;
        proxy_cache_key $scheme$host$request_uri;
        proxy_cache_methods GET HEAD;
        proxy_cache_lock on;
        proxy_cache_lock_timeout 10s;
        proxy_cache_use_stale error timeout http_500 http_502 http_503 http_504;
        proxy_cache_background_update on;
        proxy_cache_revalidate on;
        add_header X-Cache-Status $upstream_cache_status always;
    }
}
`

/** A whole nginx.conf for a private server in `dir`: in the foreground, every path inside `dir`. */
const privateConfig = (dir: string, proxy: CachingProxyOptions) => `daemon off;
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} notice;
events { worker_connections 4096; }
http {
    client_body_temp_path ${join(dir, "client_body")};
    proxy_temp_path ${join(dir, "proxy")};
    fastcgi_temp_path ${join(dir, "fastcgi")};
    uwsgi_temp_path ${join(dir, "uwsgi")};
    scgi_temp_path ${join(dir, "scgi")};
    keepalive_requests 100000;

${cachingProxyConfig(proxy).replace(/^(?=.)/gm, "    ")}}
`

export interface CachingProxy {
  readonly url: string
  readonly port: number
  readonly child: ChildProcess
  /** The access log's lines so far. */
  readonly accessLog: () => ReadonlyArray<string>
  /** Points the proxy at another origin (the configuration rewritten, then reloaded): resolves once it is reloaded. */
  readonly repoint: (origin: string) => Promise<void>
  readonly stop: () => Promise<void>
}

/** Whether something accepts connections on `port` of 127.0.0.1. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const startOnce = async (origin: string): Promise<CachingProxy> => {
  const dir = mkdtempSync(join(tmpdir(), "crypto-api-nginx-"))
  // nginx's workers run as nobody when the master is root: the cache and temp paths must be theirs to write.
  chmodSync(dir, 0o755)
  for (const sub of ["cache", "client_body", "proxy", "fastcgi", "uwsgi", "scgi"]) {
    mkdirSync(join(dir, sub))
    chmodSync(join(dir, sub), 0o777)
  }
  const port = await freePort()
  const options = (to: string): CachingProxyOptions => ({
    listen: `127.0.0.1:${port}`,
    origin: to,
    cacheDir: join(dir, "cache"),
    accessLog: join(dir, "access.log")
  })
  const conf = join(dir, "nginx.conf")
  writeFileSync(conf, privateConfig(dir, options(origin)))
  const child = spawn(nginxPath, ["-p", dir, "-c", conf, "-e", join(dir, "error.log")], { stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  child.stdout!.on("data", (c) => (out += c))
  child.stderr!.on("data", (c) => (out += c))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const errorLog = () => (existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : "")
  await new Promise<void>((resolve, reject) => {
    child.once("error", (error: NodeJS.ErrnoException) =>
      reject(new Error(error.code === "ENOENT" ? "nginx is not installed: run `apt-get install -y nginx` (npm test does it when run as root)" : error.message)))
    const started = Date.now()
    const poll = async () => {
      if (child.exitCode !== null) return
      if (await accepts(port)) return resolve()
      if (Date.now() - started > 15_000) return reject(new Error(`nginx did not listen in 15 s: ${out}${errorLog()}`))
      setTimeout(poll, 20)
    }
    void exited.then((code) => reject(new Error(`nginx exited (${code}) before it listened: ${out}${errorLog()}`)))
    void poll()
  })
  const accessLog = () => (existsSync(join(dir, "access.log")) ? readFileSync(join(dir, "access.log"), "utf8").split("\n").filter((l) => l !== "") : [])
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    accessLog,
    repoint: async (to) => {
      writeFileSync(conf, privateConfig(dir, options(to)))
      const reloads = (errorLog().match(/reconfiguring/g) ?? []).length
      child.kill("SIGHUP")
      // The master says "reconfiguring" once it has read the new configuration and started its new worker.
      for (let waited = 0; (errorLog().match(/reconfiguring/g) ?? []).length === reloads; waited += 20) {
        if (waited > 15_000) throw new Error(`nginx did not reload in 15 s: ${errorLog()}`)
        await new Promise((r) => setTimeout(r, 20))
      }
    },
    stop: async () => {
      if (child.exitCode === null) {
        child.kill("SIGQUIT")
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A private nginx caching `origin` (`host:port`), on a port free when picked, picked again when it was taken first. */
export const startCachingProxy = (origin: string): Promise<CachingProxy> =>
  onAnotherPortIfTaken(() => startOnce(origin), /Address already in use/)
