#!/usr/bin/env node
// Extracts every error code of every part from the sources (defineError(...) registries,
// the auth engine's AuthError/OAuthError constructors) and writes docs/errors.md.
// test/shared/errors-registry.test.ts fails when the document and the sources disagree.
// Usage: node scripts/errors-doc.mjs [--check]
import { readFileSync, readdirSync, writeFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

const PARTS = {
  shared: 'Codes shared by the parts (each part that can send one lists it too)',
  gateway: 'Gateway (JSON `{code, message, details, hint}`, code also in `x-gatehouse-error-code`)',
  rest: 'REST engine (PostgREST codes; a Postgres error keeps its SQLSTATE as `code`, status from the SQLSTATE table)',
  auth: 'Auth engine (GoTrue `error_code` values; body shape chosen by `X-Supabase-Api-Version`)',
  panel: 'Control-panel API',
  tenants: 'Tenant store and `gatehouse tenants apply|list|show|delete`',
  platform: 'Provisioning and `gatehouse tenants create|drop|migrate`'
}

function walk (dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name)
    if (statSync(p).isDirectory()) out.push(...walk(p))
    else if (name.endsWith('.ts')) out.push(p)
  }
  return out
}

/** [{part, code, status, message}] from the sources, one per (part, code, status). */
export function extractCodes () {
  const found = new Map()
  const add = (part, code, status, message) => {
    const key = `${part}|${code}|${status}`
    if (!found.has(key)) found.set(key, { part, code, status: Number(status), message: message.trim() })
  }
  for (const part of Object.keys(PARTS)) {
    const dir = path.join(root, 'src', part)
    let files
    try { files = walk(dir) } catch { continue }
    for (const file of files) {
      const text = readFileSync(file, 'utf8')
      // defineError('code', status, (...) => `message` | 'message')
      for (const m of text.matchAll(/defineError\(\s*'([A-Za-z0-9_]+)',\s*(\d{3}),\s*(?:\([^)]*\)|[a-z_]+)\s*=>\s*(`[^`]*`|'[^']*'|"[^"]*")?/g)) {
        add(part === 'gateway' && file.includes(`${path.sep}rewrite${path.sep}`) ? 'gateway' : part, m[1], m[2], (m[3] ?? '').replace(/^[`'"]|[`'"]$/g, ''))
      }
      if (part === 'auth') {
        for (const m of text.matchAll(/make\('([a-z_]+)',\s*(\d{3})\)/g)) add(part, m[1], m[2], '')
        for (const m of text.matchAll(/new AuthError\('([a-z_]+)',\s*(\d{3}),\s*(`[^`]*`|'[^']*')?/g)) add(part, m[1], m[2], (m[3] ?? '').replace(/^[`']|[`']$/g, ''))
        for (const m of text.matchAll(/new OAuthError\('([a-z_]+)'/g)) add(part, m[1], '400', 'OAuth form `{error, error_description}`')
      }
    }
  }
  return [...found.values()].sort((a, b) => a.part.localeCompare(b.part) || a.code.localeCompare(b.code) || a.status - b.status)
}

const REFUSALS = `## Refusals of table access (service.md)

The gateway rewrites REST refusals (from our engine or a real PostgREST) into these:

| code | status | meaning |
|---|---|---|
| \`unknown_table\` | 404 | The table is not in the catalog of the role the request ran as (missing, or the role holds no privilege on it). The message names the role as the caller knows it (anon / authenticated / svc) and its real name; the hint explains the usual cause: a grant to the wrong role, to be made with \`platform.grant(...)\`. |
| \`no_table_grant\` | 403 | The table is visible to the role but the privilege the method needs is missing; \`hint\` holds the ready statement (\`SELECT platform.grant('INSERT', 'public.t', 'auth');\`). |
| \`permission_denied\` | 401 for anon, 403 otherwise | Any other refusal by the database itself; carries \`sqlstate: "42501"\`. |
| \`rls_refusal\` | 403 | Insert or update with \`Prefer: return=representation\` whose row the SELECT policy hides: the row **was written**; do not retry. |
| (empty array) | 200 | The grant exists but the row-level security policy lets no row through: a working policy, not an error. |
`

export function renderDoc (codes) {
  const lines = ['# Error reference', '',
    'Generated from the sources by `node scripts/errors-doc.mjs`; `test/shared/errors-registry.test.ts`',
    'fails when a code is missing here or a listed code no longer exists. Codes are never reused.', '',
    REFUSALS]
  for (const [part, title] of Object.entries(PARTS)) {
    const rows = codes.filter((c) => c.part === part)
    if (!rows.length) continue
    lines.push(`## ${title}`, '', '| code | status | message |', '|---|---|---|')
    for (const r of rows) lines.push(`| \`${r.code}\` | ${r.status} | ${r.message.replace(/\|/g, '\\|').replace(/\$\{[^}]*\}/g, '…') || '(message set where raised)'} |`)
    lines.push('')
  }
  return lines.join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const doc = renderDoc(extractCodes())
  const file = path.join(root, 'docs', 'errors.md')
  if (process.argv.includes('--check')) {
    const current = readFileSync(file, 'utf8')
    if (current !== doc) { console.error('docs/errors.md is out of date: run node scripts/errors-doc.mjs'); process.exit(1) }
  } else {
    writeFileSync(file, doc)
    console.log(`wrote ${file}`)
  }
}
