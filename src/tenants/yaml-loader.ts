// Tenant files on disk -> validated TenantFile records. Takes one file or a directory of
// *.yaml / *.yml; validates EVERY file before returning, so callers can refuse the whole
// set. Errors name the file and the field, never a secret (redact.ts); this module never
// writes anything.
import { readFileSync, readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { parse as parseYaml, YAMLParseError } from 'yaml'
import { tenantFileEnvironment } from '../config/index.js'
import { ConfigError } from '../shared/index.js'
import { parseTenantFile, type TenantFile } from './schema.js'
import { redactSecrets } from './redact.js'

const YAML_FILE = /\.ya?ml$/i

/** One validated file and where it came from. */
export interface LoadedTenantFile {
  path: string
  file: TenantFile
}

/** The tenant files a path names: itself when it is a file, else the *.yaml / *.yml in it (sorted). */
function listTenantFiles(fileOrDir: string): string[] {
  let st
  try {
    st = statSync(fileOrDir)
  } catch {
    throw new ConfigError(`tenant files: ${fileOrDir} does not exist`)
  }
  if (st.isFile()) return [fileOrDir]
  if (!st.isDirectory()) throw new ConfigError(`tenant files: ${fileOrDir} is neither a file nor a directory`)
  return readdirSync(fileOrDir)
    .filter((name) => YAML_FILE.test(name) && !name.startsWith('.'))
    .sort()
    .map((name) => path.join(fileOrDir, name))
    .filter((p) => statSync(p).isFile())
}

/** The problems of a tenant file's text that does not parse as YAML (the excerpt's secrets masked). */
function yamlProblem(file: string, text: string, err: Error): string {
  const where = err instanceof YAMLParseError && err.linePos ? ` (line ${err.linePos[0].line})` : ''
  // `{ secret: ${X} }` is a YAML error: braces are flow indicators inside { } and [ ].
  const hint = /[{[][^\n]*\$\{/.test(text) ? ' (inside { } or [ ], quote ${ENV} values: secret: "${NAME}")' : ''
  // The parser's excerpt of the lines around the error, secrets masked (docs/tenant-state.md).
  const [first, ...context] = err.message.split('\n')
  const excerpt = context
    .filter((l) => l.trim() !== '')
    .map((l) => `    ${redactSecrets(l)}`)
    .join('\n')
  return `${file}: not valid YAML${where}: ${redactSecrets(first ?? '', { excerpt: false })}${hint}${excerpt ? '\n' + excerpt : ''}`
}

/**
 * The text of tenant file `file` as its record: parsed, `${ENV}` expanded in secret fields,
 * validated, its database matching the file's name. Throws a ConfigError listing every problem.
 */
export function parseTenantText(text: string, file: string, env: NodeJS.ProcessEnv): TenantFile {
  let raw: unknown
  try {
    raw = parseYaml(text, { prettyErrors: true })
  } catch (err) {
    throw new ConfigError(`invalid tenant file ${file}`, [yamlProblem(file, text, err as Error)])
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new ConfigError(`invalid tenant file ${file}`, [
      `${file}: must hold a mapping (database: ..., organization: ..., ...)`,
    ])
  const parsed = parseTenantFile(raw, file, env)
  const expected = path.basename(file).replace(YAML_FILE, '')
  if (parsed.database !== expected) {
    throw new ConfigError(`invalid tenant file ${file}`, [
      `${file}: database: is "${parsed.database}" but the file is named ${path.basename(file)}; name it ${parsed.database}.yaml`,
    ])
  }
  return parsed
}

function readOne(file: string, env: NodeJS.ProcessEnv, problems: string[]): TenantFile | null {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    problems.push(`${file}: cannot read: ${(err as Error).message}`)
    return null
  }
  try {
    return parseTenantText(text, file, env)
  } catch (err) {
    if (err instanceof ConfigError && err.problems.length) {
      problems.push(...err.problems)
      return null
    }
    throw err
  }
}

/**
 * Reads and validates every tenant file under `fileOrDir`. Throws one ConfigError listing
 * every problem of every file (file + field), or for a database named by two files.
 */
export function loadTenantFileEntries(
  fileOrDir: string,
  env: NodeJS.ProcessEnv = tenantFileEnvironment(),
): LoadedTenantFile[] {
  const files = listTenantFiles(fileOrDir)
  const problems: string[] = []
  const out: LoadedTenantFile[] = []
  const seen = new Map<string, string>()
  for (const p of files) {
    const file = readOne(p, env, problems)
    if (!file) continue
    const first = seen.get(file.database)
    if (first !== undefined) {
      problems.push(`${p}: database: "${file.database}" is already defined by ${first}`)
      continue
    }
    seen.set(file.database, p)
    out.push({ path: p, file })
  }
  if (problems.length) {
    const n = new Set(problems.map((s) => s.split(': ')[0])).size
    throw new ConfigError(`invalid tenant files (${n} of ${files.length} refused)`, problems)
  }
  return out
}

/** Reads and validates every tenant file under `fileOrDir` (see loadTenantFileEntries). */
export function loadTenantFiles(fileOrDir: string, env: NodeJS.ProcessEnv = tenantFileEnvironment()): TenantFile[] {
  return loadTenantFileEntries(fileOrDir, env).map((e) => e.file)
}
