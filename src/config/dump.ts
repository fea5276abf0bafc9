// The effective config as sorted text, secrets masked (`gatehouse config dump`).
import { maskUrlPassword } from '../shared/index.js'
import type { Config } from './schema.js'

const SECRET = /(secret|password|pass|token)$/i

export function dumpConfig(cfg: Config): string {
  const lines: string[] = []
  const walk = (o: unknown, path: string) => {
    if (o && typeof o === 'object' && !Array.isArray(o)) {
      for (const k of Object.keys(o).sort()) walk((o as Record<string, unknown>)[k], path ? `${path}.${k}` : k)
      return
    }
    let v = o
    if (typeof v === 'string') v = SECRET.test(path) ? '****' : maskUrlPassword(v)
    lines.push(`${path} = ${JSON.stringify(v)}`)
  }
  walk(cfg, '')
  return lines.join('\n') + '\n'
}
