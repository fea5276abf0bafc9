// Writes docs/errors.md from the error registries of the parts (imported, not scraped):
// every code, its status and its message. test/shared/errors-registry.test.ts renders the
// same document and fails when the file differs, so a registry changed without
// regenerating fails the suite.
// Usage: npm run errors-doc   (node --import tsx scripts/errors-doc.ts [--check])
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  SHARED_ERRORS,
  type AnyErrorClass,
  type ErrorCase,
  type ErrorRegistry,
  type ErrorText,
} from '../src/shared/index.js'
import { GATEWAY_ERRORS, REFUSAL_ERRORS } from '../src/gateway/index.js'
import { REST_ERRORS } from '../src/rest/index.js'
import { AUTH_ERRORS } from '../src/auth/index.js'
import { PANEL_ERRORS } from '../src/panel/index.js'
import { TENANT_ERRORS } from '../src/tenants/index.js'
import { PLATFORM_ERRORS } from '../src/platform/index.js'
import { TYPEGEN_ERRORS } from '../src/typegen/index.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const ERRORS_DOC = path.join(root, 'docs', 'errors.md')

const PARTS: ReadonlyArray<[string, ErrorRegistry]> = [
  ['Codes shared by the parts (each part that can send one lists it too)', SHARED_ERRORS],
  ['Gateway (JSON `{code, message, details, hint}`, code also in `x-gatehouse-error-code`)', GATEWAY_ERRORS],
  [
    'REST engine (PostgREST codes; a Postgres error keeps its SQLSTATE as `code`, status from the SQLSTATE table)',
    REST_ERRORS,
  ],
  [
    'Auth engine (GoTrue `error_code` values; body shape chosen by `X-Supabase-Api-Version`; `invalid request`, `invalid_request` and `invalid nonce` are OAuth-form `{error, error_description}`)',
    AUTH_ERRORS,
  ],
  ['Control-panel API', PANEL_ERRORS],
  ['Tenant store and `gatehouse tenants apply|list|show|delete|keys`', TENANT_ERRORS],
  ['Provisioning and `gatehouse tenants create|drop|migrate`', PLATFORM_ERRORS],
  ['Type generation (`gatehouse gen types typescript`)', TYPEGEN_ERRORS],
]

/** What each refusal means, for the people reading the reference (docs/service.md §7). */
const REFUSAL_MEANINGS: Readonly<Record<string, string>> = {
  unknown_table:
    'The table is not in the catalog of the role the request ran as (missing, or the role holds no privilege on it). The message names the role as the caller knows it (anon / authenticated / svc) and its real name; the hint explains the usual cause: a grant to the wrong role, to be made with `platform.grant(...)`.',
  no_table_grant:
    "The table is visible to the role but the privilege the method needs is missing; `hint` holds the ready statement (`SELECT platform.grant('INSERT', 'public.t', 'auth');`).",
  permission_denied: 'Any other refusal by the database itself; carries `sqlstate: "42501"`.',
  rls_refusal:
    'Insert or update with `Prefer: return=representation` whose row the SELECT policy hides: the row **was written**; do not retry.',
}

interface Row {
  code: string
  status: number
  message: string
}

/** A message with `…` for each argument it is built from (a string that also joins, for a list argument). */
function sampleMessage(template: (...args: never[]) => ErrorText): string {
  const args = Array.from({ length: template.length }, () =>
    Object.assign(new String('…'), { join: () => '…' }),
  ) as never[]
  const t = template(...args)
  const text = String(typeof t === 'object' && 'message' in t ? t.message : t)
  return text === '…' ? '(message set where raised)' : text
}

/** The rows of a class: one, or one per case of a class made by defineErrorCases. */
function classRows(cls: AnyErrorClass): Row[] {
  const cases = (cls as { cases?: Readonly<Record<string, ErrorCase>> }).cases
  if (cases === undefined) return [{ code: cls.code, status: cls.status, message: sampleMessage(cls.template) }]
  return Object.values(cases).map(([status, message]) => ({
    code: cls.code,
    status,
    message: sampleMessage(typeof message === 'function' ? message : () => message),
  }))
}

function rowsOf(registry: ErrorRegistry): Row[] {
  const seen = new Map<string, Row>()
  for (const row of Object.values(registry).flatMap(classRows)) seen.set(JSON.stringify(row), row)
  return [...seen.values()].sort(
    (a, b) => a.code.localeCompare(b.code) || a.status - b.status || a.message.localeCompare(b.message),
  )
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')

/** docs/errors.md as the registries say it should be. */
export function renderErrorsDoc(): string {
  const lines = [
    '# Error reference',
    '',
    'Generated from the error registries of the parts by `npm run errors-doc`; `test/shared/errors-registry.test.ts`',
    'fails when this file differs from what the registries say. Codes are never reused.',
    '',
    '## Refusals of table access (docs/service.md §7)',
    '',
    'The gateway rewrites REST refusals (from our engine or a real PostgREST) into these:',
    '',
    '| code | status | message | meaning |',
    '|---|---|---|---|',
  ]
  for (const r of rowsOf(REFUSAL_ERRORS)) {
    const meaning = REFUSAL_MEANINGS[r.code]
    if (meaning === undefined) throw new TypeError(`refusal ${r.code} has no meaning in scripts/errors-doc.ts`)
    lines.push(`| \`${r.code}\` | ${r.status} | ${cell(r.message)} | ${cell(meaning)} |`)
  }
  lines.push(
    '| (empty array) | 200 | | The grant exists but the row-level security policy lets no row through: a working policy, not an error. |',
    '',
  )
  for (const [title, registry] of PARTS) {
    lines.push(`## ${title}`, '', '| code | status | message |', '|---|---|---|')
    for (const r of rowsOf(registry)) lines.push(`| \`${r.code}\` | ${r.status} | ${cell(r.message)} |`)
    lines.push('')
  }
  return lines.join('\n')
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const doc = renderErrorsDoc()
  if (process.argv.includes('--check')) {
    if (readFileSync(ERRORS_DOC, 'utf8') !== doc) {
      console.error('docs/errors.md is out of date: run npm run errors-doc')
      process.exitCode = 1
    }
  } else {
    writeFileSync(ERRORS_DOC, doc)
    console.log(`wrote ${ERRORS_DOC}`)
  }
}
