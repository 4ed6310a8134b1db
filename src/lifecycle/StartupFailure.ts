/**
 * Something outside the configuration's values stops the start-up (a busy port, a full disk, a database
 * that cannot be used...): `problem` is the one line an operator reads, naming what to fix
 * (src/startup.ts prints it, CONTRACT C9). Here, below every layer that fails a start-up with it.
 */
import { Data } from "effect"

export class StartupFailure extends Data.TaggedError("StartupFailure")<{ readonly problem: string }> {
  override get message() {
    return this.problem
  }
}
