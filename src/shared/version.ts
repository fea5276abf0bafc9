// The package's version and the runtime's, for gatehouse_build_info and the spans' resource.
import { readFileSync } from 'node:fs'

let version: string | undefined

/** package.json's version (beside src/ and dist/: two folders up from this module). */
export function packageVersion(): string {
  if (version === undefined) {
    try {
      version =
        (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string })
          .version ?? '0.0.0'
    } catch {
      version = '0.0.0'
    }
  }
  return version
}
