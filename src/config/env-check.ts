// GATEHOUSE_* variables that name no configuration key: reported (with the nearest key's
// variable) so a typo is never silently ignored. Variables of the tooling around the
// processes (deploy scripts, the test wrapper, systemd's *_ARGS) are known and not reported.
import { ConfigSchema } from './schema.js'

const TOOLING =
  /^GATEHOUSE_(?:CONFIG|HOME|IMAGE|HEALTHCHECK_URL|DEV_PG_PORT|DEV_PORT_OFFSET|DEBUG_PG|TEST_[A-Z0-9_]*|BOOTSTRAP_[A-Z0-9_]*|[A-Z]+_ARGS)$/

/** Every GATEHOUSE_* variable the configuration reads, with the key's default (undefined: none). */
export function configEnvEntries(): Array<{ name: string; default: unknown }> {
  const out: Array<{ name: string; default: unknown }> = []
  type Prop = { default?: unknown; properties?: Record<string, { default?: unknown }> }
  const props = (ConfigSchema as unknown as { properties: Record<string, Prop> }).properties
  for (const [section, schema] of Object.entries(props)) {
    if (schema.properties) {
      for (const [key, p] of Object.entries(schema.properties))
        out.push({ name: `GATEHOUSE_${section}_${key}`.toUpperCase(), default: p.default })
    } else {
      out.push({ name: `GATEHOUSE_${section}`.toUpperCase(), default: schema.default })
    }
  }
  return out
}

/** Every GATEHOUSE_* variable the configuration reads. */
export function configEnvNames(): string[] {
  return configEnvEntries().map((e) => e.name)
}

function distance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!
    prev[0] = i
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1))
      diag = up
    }
  }
  return prev[b.length]!
}

/** The known variable nearest to `name` (edit distance). */
function nearestEnvName(name: string, known: readonly string[] = configEnvNames()): string {
  let best = known[0]!
  let bestD = Infinity
  for (const k of known) {
    const d = distance(name, k)
    if (d < bestD) {
      best = k
      bestD = d
    }
  }
  return best
}

/** One line per GATEHOUSE_* variable of `env` that no configuration key reads. */
export function unknownEnvironment(env: NodeJS.ProcessEnv): string[] {
  const known = configEnvNames()
  const set = new Set(known)
  const out: string[] = []
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('GATEHOUSE_') || set.has(name) || TOOLING.test(name)) continue
    out.push(
      `unknown environment variable ${name} is ignored: no configuration key reads it (nearest: ${nearestEnvName(name, known)})`,
    )
  }
  return out
}
