// Secrets out of text about tenant files (docs/tenant-state.md): a YAML parser's error quotes
// the lines around the error, which may hold a connection string with its password, an API
// key, a JWT secret or a private key. Every message about a tenant file passes through here
// before anyone sees it.

import type { TSchema } from '@sinclair/typebox'
import { secretPropertyNames } from './secret-fields.js'

const MASK = '****'

/**
 * The rules: a `name: value` is masked for every field name the record's schema declares
 * secret (schema.ts imports this module, so it hands its schema over once defined); until
 * then, every `name: value` is.
 */
function rulesOf(schema: TSchema | null): Array<[RegExp, string]> {
  const names = schema === null ? '[A-Za-z_][A-Za-z0-9_]*' : secretPropertyNames(schema).join('|')
  return [
    // PEM private keys (whole block, or what the excerpt shows of it).
    [
      /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g,
      `-----BEGIN PRIVATE KEY-----${MASK}`,
    ],
    // Connection strings: scheme://user:password@host.
    [/([a-z][a-z0-9+.-]*:\/\/[^\s:/@'"]*:)[^\s@'"]+@/gi, `$1${MASK}@`],
    // Private JWK members (EC and RSA).
    [/("(?:d|p|q|dp|dq|qi|k)"\s*:\s*")[^"]*"/g, `$1${MASK}"`],
    // `name: value` of a secret field, quoted or not, up to the end of the value.
    [
      new RegExp(`(^|[\\s{,"'])((?:${names})["']?\\s*:\\s*)("[^"\\n]*"?|'[^'\\n]*'?|[^\\s,}\\n]+)`, 'gim'),
      `$1$2${MASK}`,
    ],
    // Standard Webhooks secrets (auth hooks).
    [/v1,whsec_[A-Za-z0-9+/=]+/g, `v1,whsec_${MASK}`],
    // API keys and JWT-looking strings anywhere.
    [/\b(pk|sk)_[A-Za-z0-9_]{8,}/g, `$1_${MASK}`],
    [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, MASK],
  ]
}

let rules = rulesOf(null)

/** Called by schema.ts with the record's schema once it is defined. */
export function redactFieldsOf(schema: TSchema): void {
  rules = rulesOf(schema)
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A long run of base64 (a line of a PEM body, a generated secret), unless it is a UUID (a kid). */
const LONG_BASE64 = /[A-Za-z0-9+/_=-]{32,}/g

/**
 * `text` with passwords, keys, secrets and private keys replaced by ****. `excerpt: false`
 * for a message that may name a path (a long run of base64 is then left, since a path looks
 * like one): only an excerpt of a file can hold a bare line of a PEM body.
 */
export function redactSecrets(text: string, opts: { excerpt?: boolean } = {}): string {
  let out = text
  for (const [re, by] of rules) out = out.replace(re, by)
  return opts.excerpt === false ? out : out.replace(LONG_BASE64, (m) => (UUID.test(m) ? m : MASK))
}
