// Request bodies of writes and RPC (docs/rest-protocol.md §3.1, §4.1, §5.5): JSON object or array,
// CSV, form fields, and the raw bodies of a single unnamed parameter. Pure: validates and
// describes the body; the JSON text that reaches Postgres is the client's own bytes (never
// re-serialized, so big numbers keep their digits). Errors are PGRST102.
import { InvalidBodyError } from '../errors.js'
import type { MediaType } from './types.js'
import { bareRecord, isPlainObject } from '../../shared/index.js'
import { showString } from './parsec.js'

/** Rows of a write: the keys they carry and the JSON text bound as one parameter. */
export interface RowsPayload {
  readonly kind: 'rows'
  /** An array body (bulk) rather than one object. */
  readonly isArray: boolean
  /** The parsed rows (validation, key sets); values are not sent from here. */
  readonly rows: ReadonlyArray<Readonly<Record<string, unknown>>>
  /**
   * The columns the body names: `columns=` when given, else the keys of the rows
   * (uniform across an array), sorted.
   */
  readonly keys: readonly string[]
  /** The JSON text to bind: an object (isArray false) or an array of objects. */
  readonly json: string
}

/** RPC arguments: named ones, or a raw body for a single unnamed parameter. */
export type CallPayload =
  /**
   * A JSON object body: argument names and the JSON text (json_to_record); or, `array`, a
   * JSON array of objects with the same keys or a CSV body, whose first row is the arguments
   * (json_to_recordset, as PostgREST). `csv` when it came as text/csv.
   */
  | {
      readonly kind: 'json-args'
      readonly keys: readonly string[]
      readonly json: string
      readonly array?: boolean
      readonly csv?: boolean
    }
  /** Form fields or query parameters: text values cast to each parameter's type. */
  | { readonly kind: 'text-args'; readonly args: ReadonlyArray<readonly [string, readonly string[]]> }
  /** text/plain, text/xml or application/octet-stream: only a single unnamed text/xml/bytea parameter. */
  | {
      readonly kind: 'raw'
      readonly mime: 'text/plain' | 'text/xml' | 'application/octet-stream'
      readonly bytes: Buffer
    }

const EMPTY_OR_INVALID = 'Empty or invalid json'
const KEYS_MUST_MATCH = 'All object keys must match'

function parseJson(body: Buffer | null): { value: unknown; text: string } {
  const text = utf8(body)
  if (text.trim() === '') throw new InvalidBodyError(EMPTY_OR_INVALID)
  try {
    return { value: JSON.parse(text) as unknown, text }
  } catch {
    throw new InvalidBodyError(EMPTY_OR_INVALID)
  }
}

/** The sorted keys every row carries (none without rows); `mismatch` when a row's keys differ. */
function uniformKeys(rows: ReadonlyArray<Record<string, unknown>>, mismatch: string): string[] {
  const keys = rows.length === 0 ? [] : Object.keys(rows[0]).sort()
  for (const r of rows) {
    const own = Object.keys(r).sort()
    if (own.length !== keys.length || own.some((k, i) => k !== keys[i])) throw new InvalidBodyError(mismatch)
  }
  return keys
}

const utf8 = (body: Buffer | null): string => (body === null ? '' : body.toString('utf8'))

/** Whether a JSON text looks like an object: its first non-blank character is `{`. */
function looksLikeObject(text: string): boolean {
  return /^[ \t\n\r]*\{/.test(text)
}

/**
 * A JSON body with `columns=`: passed to Postgres as sent, unparsed (as PostgREST does), so
 * invalid JSON is Postgres' own 22P02. `isArray` is decided by the first character; the rows
 * are the parsed body when it parses (only used to see which keys a row carries).
 */
function rawJsonRows(body: Buffer | null, columns: readonly string[]): RowsPayload {
  const text = utf8(body)
  let value: unknown = null
  try {
    value = JSON.parse(text)
  } catch {}
  const rows = isPlainObject(value) ? [value] : Array.isArray(value) ? value.filter(isPlainObject) : []
  return { kind: 'rows', isArray: !looksLikeObject(text), rows, keys: columns, json: text }
}

/** JSON rows: an object, an array of objects with the same keys, or a scalar (= []); raw with `columns=`. */
function jsonRows(body: Buffer | null, columns: readonly string[] | null): RowsPayload {
  if (columns !== null) return rawJsonRows(body, columns)
  const { value, text } = parseJson(body)
  if (isPlainObject(value)) {
    return { kind: 'rows', isArray: false, rows: [value], keys: Object.keys(value).sort(), json: text }
  }
  if (!Array.isArray(value)) {
    // Matches PostgREST: a bare JSON scalar is taken as an empty array (nothing is written).
    return { kind: 'rows', isArray: true, rows: [], keys: [], json: '[]' }
  }
  if (!value.every(isPlainObject)) throw new InvalidBodyError(KEYS_MUST_MATCH)
  return { kind: 'rows', isArray: true, rows: value, keys: uniformKeys(value, KEYS_MUST_MATCH), json: text }
}

/** The failure of the CSV parser, worded as PostgREST (cassava over attoparsec) words it. */
function csvFailure(message: string, text: string, at: number): Error {
  const left = text.slice(at)
  const shown = left.length > 100 ? left.slice(0, 100) + ' (truncated)' : showString(left)
  return new InvalidBodyError(`parse error (${message}) at ${shown}`)
}

/** A quoted CSV field's content with each `""` read as one quote; a lone quote is cassava's error. */
function unescapeQuoted(inner: string, text: string, pos: number): string {
  if (!inner.includes('"')) return inner
  let out = ''
  for (let i = 0; i < inner.length; i++) {
    if (inner[i] !== '"') {
      out += inner[i]
      continue
    }
    if (inner[i + 1] !== '"') throw csvFailure('Failed reading: insufficient input', text, pos)
    out += '"'
    i++
  }
  return out
}

/**
 * CSV as PostgREST reads it (cassava's decodeByName): a header line that must end with a
 * line break, then records; a field is quoted (`""` for a quote) or runs to a comma, quote
 * or line break; blank records are skipped; NULL (quoted or not) is SQL null. Works on the
 * body's bytes (one character per byte) so errors show the unread input as cassava does.
 */
export function parseCsv(text: string): { header: string[]; rows: Array<Array<string | null>> } {
  const n = text.length
  let pos = 0
  const field = (): string => {
    if (text[pos] !== '"') {
      const start = pos
      while (pos < n && text[pos] !== '"' && text[pos] !== ',' && text[pos] !== '\n' && text[pos] !== '\r') pos++
      return text.slice(start, pos)
    }
    pos++
    const start = pos
    let afterQuote = false
    while (pos < n) {
      if (text[pos] === '"') afterQuote = !afterQuote
      else if (afterQuote) break
      pos++
    }
    const scanned = text.slice(start, pos)
    if (scanned === '') throw csvFailure('Failed reading: trailing double quote', text, pos)
    // cassava drops the last scanned character as the closing quote (even at the end of input).
    return unescapeQuoted(scanned.slice(0, -1), text, pos)
  }
  const record = (): string[] => {
    const fields = [field()]
    while (text[pos] === ',') {
      pos++
      fields.push(field())
    }
    return fields
  }
  const endOfLine = (): void => {
    if (text[pos] === '\n') {
      pos++
      return
    }
    if (text[pos] === '\r' && text[pos + 1] === '\n') {
      pos += 2
      return
    }
    throw csvFailure(pos >= n || (text[pos] === '\r' && pos + 1 >= n) ? 'not enough input' : 'string', text, pos)
  }
  const bytesToText = (s: string): string => Buffer.from(s, 'latin1').toString('utf8')
  const header = record().map(bytesToText)
  endOfLine()
  const rows: Array<Array<string | null>> = []
  for (;;) {
    const r = record()
    if (!(r.length === 1 && r[0] === '')) rows.push(r.map((v) => (v === 'NULL' ? null : bytesToText(v))))
    if (pos >= n) break
    endOfLine()
  }
  return { header, rows }
}

/**
 * CSV rows: the header names the columns (`columns=` is not read, as PostgREST). As cassava
 * pairs them, a record longer than the header loses its extra fields and a repeated name
 * keeps its last field; then, as PostgREST, every record must carry the first one's columns.
 */
function csvRows(body: Buffer | null): RowsPayload {
  const { header, rows } = parseCsv(body === null ? '' : body.toString('latin1'))
  const objects = rows.map((r) => {
    const o = bareRecord<string | null>()
    for (let k = 0; k < Math.min(header.length, r.length); k++) o[header[k]] = r[k]
    return o
  })
  const keys = uniformKeys(objects, 'All lines must have same number of fields')
  return { kind: 'rows', isArray: true, rows: objects, keys, json: JSON.stringify(objects) }
}

/** `a=1&b=2` with `+` as a space; a repeated name keeps every value in order. */
function parseForm(body: Buffer | null): Array<[string, string[]]> {
  const text = utf8(body)
  const out = new Map<string, string[]>()
  for (const part of text.split('&')) {
    if (part === '') continue
    const eq = part.indexOf('=')
    const rawKey = eq < 0 ? part : part.slice(0, eq)
    const rawValue = eq < 0 ? '' : part.slice(eq + 1)
    let k: string, v: string
    try {
      k = decodeURIComponent(rawKey.replace(/\+/g, ' '))
      v = decodeURIComponent(rawValue.replace(/\+/g, ' '))
    } catch {
      throw new InvalidBodyError('Invalid percent-encoding in the form body')
    }
    const list = out.get(k)
    if (list) list.push(v)
    else out.set(k, [v])
  }
  return [...out]
}

/** Form rows: the fields name the columns (`columns=` is not read, as PostgREST). */
function formRows(body: Buffer | null): RowsPayload {
  const row = bareRecord<string>()
  for (const [k, vs] of parseForm(body)) row[k] = vs[vs.length - 1]
  return { kind: 'rows', isArray: false, rows: [row], keys: Object.keys(row).sort(), json: JSON.stringify(row) }
}

/** The body of POST / PATCH / PUT on a table (docs/rest-protocol.md §3.1). */
export function parseWritePayload(
  body: Buffer | null,
  contentType: MediaType | null,
  columns: readonly string[] | null,
): RowsPayload {
  const type = contentType?.type ?? 'application/json'
  switch (type) {
    case 'application/json':
      return jsonRows(body, columns)
    case 'text/csv':
      return csvRows(body)
    case 'application/x-www-form-urlencoded':
      return formRows(body)
    default:
      throw new InvalidBodyError(`Content-Type not acceptable: ${type}`)
  }
}

/** The body of `POST /rpc/<fn>` (docs/rest-protocol.md §4.1, §5.5). An empty body counts as `{}`. */
export function parseCallPayload(
  body: Buffer | null,
  contentType: MediaType | null,
  columns: readonly string[] | null,
): CallPayload {
  const type = contentType?.type ?? 'application/json'
  switch (type) {
    case 'application/json': {
      if (columns !== null) {
        // As PostgREST: with `columns=` the body goes to Postgres unparsed (even when empty).
        const text = utf8(body)
        return { kind: 'json-args', keys: columns, json: text, array: !looksLikeObject(text) }
      }
      if (utf8(body).trim() === '') return { kind: 'json-args', keys: [], json: '{}' }
      const { value, text } = parseJson(body)
      if (Array.isArray(value)) {
        const rows = jsonRows(body, null)
        return { kind: 'json-args', keys: rows.keys, json: rows.json, array: true }
      }
      // As PostgREST (and writes): a bare JSON scalar is taken as an empty array.
      if (!isPlainObject(value)) return { kind: 'json-args', keys: [], json: '[]', array: true }
      return { kind: 'json-args', keys: Object.keys(value), json: text }
    }
    case 'application/x-www-form-urlencoded':
      // As PostgREST: the fields are the arguments (`columns=` is not read).
      return { kind: 'text-args', args: parseForm(body) }
    case 'text/plain':
    case 'text/xml':
    case 'application/octet-stream':
      return { kind: 'raw', mime: type, bytes: body ?? Buffer.alloc(0) }
    case 'text/csv': {
      const rows = csvRows(body)
      return { kind: 'json-args', keys: rows.keys, json: rows.json, array: true, csv: true }
    }
    default:
      throw new InvalidBodyError(`Content-Type not acceptable: ${type}`)
  }
}
