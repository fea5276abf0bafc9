// What `gatehouse dev --help` says about the environment: every variable the stack reads.
import { configEnvEntries } from '../config/index.js'
import { DEV_CONFIG_DEFAULTS, DEV_PG_PORT } from './ports.js'

const PORT_KEYS = /_(?:PORT|ADMIN_PORT|SMTP_PORT|WEB_PORT)$/

function wrap(words: string[], width = 96, indent = '    '): string[] {
  const lines: string[] = []
  let line = indent
  for (const w of words) {
    if (line.length + w.length + 1 > width && line.trim() !== '') {
      lines.push(line.trimEnd())
      line = indent
    }
    line += w + ' '
  }
  if (line.trim() !== '') lines.push(line.trimEnd())
  return lines
}

/** Ports the stack chooses otherwise than `gatehouse serve` (DEV_CONFIG_DEFAULTS), by variable name. */
const STACK_PORTS = new Map(
  Object.entries(DEV_CONFIG_DEFAULTS).map(([section, v]) => [`GATEHOUSE_${section.toUpperCase()}_PORT`, v.port]),
)

/** The help text after `gatehouse dev`'s options: the variables it reads, ports with defaults. */
export function devEnvironmentHelp(): string {
  const entries = configEnvEntries()
  const ports = entries.filter((e) => PORT_KEYS.test(e.name))
  const others = entries.filter((e) => !PORT_KEYS.test(e.name))
  return [
    '',
    'Environment (read at start; a config file given with -c or GATEHOUSE_CONFIG comes first, variables win):',
    '  GATEHOUSE_DEV_PORT_OFFSET   added to every port of the stack, as --port-offset (default 0)',
    `  GATEHOUSE_DEV_PG_PORT       the embedded Postgres's port (default ${DEV_PG_PORT}; 0 lets the kernel choose)`,
    '  DATABASE_URL                a Postgres of your own (superuser URL) instead of the embedded one',
    '  REDIS_URL                   tenants in this Redis instead of files (also GATEHOUSE_REDIS_URL)',
    '  GATEHOUSE_CONFIG            a YAML process config file (also -c)',
    '  Ports (each moved by the offset; 0 lets the kernel choose, and dev.json and the banner say which it chose):',
    ...ports.map((e) => `    ${e.name.padEnd(34)} ${String(STACK_PORTS.get(e.name) ?? e.default)}`),
    '  Every other configuration key, as GATEHOUSE_<SECTION>_<KEY> (docs/configuration.md):',
    ...wrap(others.map((e) => e.name)),
    '',
  ].join('\n')
}
