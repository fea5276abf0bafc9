// The effective config as sorted text, secrets masked (`gatehouse config dump`).
import type { Config } from './schema.js'

const SECRET = /(secret|password|pass|token)$/i

function maskUrl(v: string): string {
  try {
    const u = new URL(v)
    if (u.password) u.password = '****'
    return u.toString()
  } catch {
    return v
  }
}

export function dumpConfig(cfg: Config): string {
  const lines: string[] = []
  const walk = (o: unknown, path: string) => {
    if (o && typeof o === 'object' && !Array.isArray(o)) {
      for (const k of Object.keys(o).sort()) walk((o as Record<string, unknown>)[k], path ? `${path}.${k}` : k)
      return
    }
    let v = o
    if (typeof v === 'string') v = SECRET.test(path) ? '****' : maskUrl(v)
    lines.push(`${path} = ${JSON.stringify(v)}`)
  }
  walk(cfg, '')
  return lines.join('\n') + '\n'
}
