// The problems a ConfigError lists (not a test file): config and tenant-file tests assert on them.
import { ConfigError } from '../../src/shared/index.js'

/** The problems of the ConfigError `fn` throws; any other outcome fails the test. */
export function problemsOf(fn: () => unknown): string[] {
  try {
    fn()
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  throw new Error('expected a ConfigError')
}
