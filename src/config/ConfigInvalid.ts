/**
 * Every configuration problem found at start-up, one line per bad variable (CONTRACT C2), so an
 * operator fixes them all in one go instead of one restart per variable.
 */
import { Data } from "effect"

export class ConfigInvalid extends Data.TaggedError("ConfigInvalid")<{ readonly problems: ReadonlyArray<string> }> {
  override get message() {
    return `Invalid configuration:\n${this.problems.map((p) => `  - ${p}`).join("\n")}`
  }
}
