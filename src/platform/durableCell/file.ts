/**
 * DurableCell as files under a directory (DATA_DIR/state/<name>.json). Several processes may share the
 * directory (a rolling deploy, replicas on one volume), so the compare-and-set runs under the cell
 * file's lock file (files.ts `withFileLock`), which holds across processes; a semaphore in front of it
 * queues this process's own callers, so that they wait on it rather than poll the lock file. Each write
 * replaces the file atomically (temp file + rename), so a crash leaves the old value or the new one,
 * never half of one.
 */
import * as path from "node:path"
import { Clock, Effect, Layer, Semaphore } from "effect"
import { readTextIfExists, withFileLock, writeFileAtomic } from "../files.ts"
import { DurableCell, DurableCellError, type DurableCellShape } from "./DurableCell.ts"

const fileName = (name: string) => `${encodeURIComponent(name)}.json`

export const makeFileCell = (directory: string): Effect.Effect<DurableCellShape> =>
  Effect.gen(function*() {
    const lock = yield* Semaphore.make(1)
    const fail = (error: { readonly message: string }) => new DurableCellError({ store: `file ${directory}`, reason: error.message })
    const fileOf = (name: string) => path.join(directory, fileName(name))
    const get = (name: string) => readTextIfExists(fileOf(name)).pipe(Effect.mapError(fail))
    return {
      store: "file",
      // One directory, one machine: its clock.
      now: Clock.currentTimeMillis,
      get,
      compareAndSet: (name, expected, next) =>
        lock.withPermit(withFileLock(
          fileOf(name),
          Effect.gen(function*() {
            if ((yield* get(name)) !== expected) return false
            yield* writeFileAtomic(fileOf(name), next, 0o600).pipe(Effect.mapError(fail))
            return true
          })
        ).pipe(Effect.mapError((error) => error._tag === "FileError" ? fail(error) : error)))
    }
  })

export const layerFile = (directory: string): Layer.Layer<DurableCell> => Layer.effect(DurableCell, makeFileCell(directory))
