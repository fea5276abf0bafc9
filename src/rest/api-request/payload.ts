// Request bodies of writes and RPC (spec/rest.md §3.1, §4.1, §5.5): JSON object or array,
// CSV, form fields, and the raw bodies of a single unnamed parameter. Pure: validates and
// describes the body; the JSON text that reaches Postgres is the client's own bytes (never
// re-serialized, so big numbers keep their digits). Errors are PGRST102.
import { InvalidBodyError } from '../errors.js'
import type { MediaType } from './types.js'
import { bareRecord } from '../../shared/index.js'

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
  | { readonly kind: 'json-args', readonly keys: readonly string[], readonly json: string, readonly array?: boolean, readonly csv?: boolean }
  /** Form fields or query parameters: text values cast to each parameter's type. */
  | { readonly kind: 'text-args', readonly args: ReadonlyArray<readonly [string, readonly string[]]> }
  /** text/plain, text/xml or application/octet-stream: only a single unnamed text/xml/bytea parameter. */
  | { readonly kind: 'raw', readonly mime: 'text/plain' | 'text/xml' | 'application/octet-stream', readonly bytes: Buffer }

const EMPTY_OR_INVALID = 'Empty or invalid json'
const KEYS_MUST_MATCH = 'All object keys must match'

function isObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function parseJson (body: Buffer | null): { value: unknown, text: string } {
  const text = body === null ? '' : body.toString('utf8')
  if (text.trim() === '') throw new InvalidBodyError(EMPTY_OR_INVALID)
  try {
    return { value: JSON.parse(text) as unknown, text }
  } catch {
    throw new InvalidBodyError(EMPTY_OR_INVALID)
  }
}

function sameKeys (a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Whether a JSON text looks like an object: its first non-blank character is `{`. */
function looksLikeObject (text: string): boolean {
  return /^[ \t\n\r]*\{/.test(text)
}

/**
 * A JSON body with `columns=`: passed to Postgres as sent, unparsed (as PostgREST does), so
 * invalid JSON is Postgres' own 22P02. `isArray` is decided by the first character; the rows
 * are the parsed body when it parses (only used to see which keys a row carries).
 */
function rawJsonRows (body: Buffer | null, columns: readonly string[]): RowsPayload {
  const text = body === null ? '' : body.toString('utf8')
  let value: unknown = null
  try { value = JSON.parse(text) } catch {}
  const rows = isObject(value) ? [value] : Array.isArray(value) ? value.filter(isObject) : []
  return { kind: 'rows', isArray: !looksLikeObject(text), rows, keys: columns, json: text }
}

/** JSON rows: an object, an array of objects with the same keys, or a scalar (= []); raw with `columns=`. */
function jsonRows (body: Buffer | null, columns: readonly string[] | null): RowsPayload {
  if (columns !== null) return rawJsonRows(body, columns)
  const { value, text } = parseJson(body)
  if (isObject(value)) {
    return { kind: 'rows', isArray: false, rows: [value], keys: Object.keys(value).sort(), json: text }
  }
  if (!Array.isArray(value)) {
    // Matches PostgREST: a bare JSON scalar is taken as an empty array (nothing is written).
    return { kind: 'rows', isArray: true, rows: [], keys: [], json: '[]' }
  }
  if (value.length === 0) return { kind: 'rows', isArray: true, rows: [], keys: [], json: text }
  if (!value.every(isObject)) throw new InvalidBodyError(KEYS_MUST_MATCH)
  const rows = value as Array<Record<string, unknown>>
  const keys = Object.keys(rows[0]).sort()
  for (let i = 1; i < rows.length; i++) {
    if (!sameKeys(keys, Object.keys(rows[i]).sort())) throw new InvalidBodyError(KEYS_MUST_MATCH)
  }
  return { kind: 'rows', isArray: true, rows, keys, json: text }
}

/**
 * CSV (RFC 4180 quoting): a header line of column names, then rows. An empty field is
 * the empty string, the bare word NULL is SQL null (spec §3.1).
 */
export function parseCsv (text: string): { header: string[], rows: Array<Array<string | null>> } {
  const lines: Array<Array<string | null>> = []
  let fields: Array<string | null> = []
  let i = 0
  const n = text.length
  const endLine = (): void => { lines.push(fields); fields = [] }
  if (n === 0) throw new InvalidBodyError('Empty CSV body')
  for (;;) {
    // one field
    if (text[i] === '"') {
      let v = ''
      i++
      for (;;) {
        if (i >= n) throw new InvalidBodyError('Unterminated quoted field in CSV body')
        const ch = text[i]
        if (ch === '"') {
          if (text[i + 1] === '"') { v += '"'; i += 2; continue }
          i++
          break
        }
        v += ch
        i++
      }
      fields.push(v)
      if (i < n && text[i] !== ',' && text[i] !== '\n' && text[i] !== '\r') {
        throw new InvalidBodyError('Unexpected character after a quoted field in CSV body')
      }
    } else {
      let j = i
      while (j < n && text[j] !== ',' && text[j] !== '\n' && text[j] !== '\r') j++
      const v = text.slice(i, j)
      fields.push(v === 'NULL' ? null : v)
      i = j
    }
    if (i >= n) { endLine(); break }
    const sep = text[i]
    if (sep === ',') { i++; continue }
    // end of line: \n or \r\n
    i += sep === '\r' && text[i + 1] === '\n' ? 2 : 1
    endLine()
    if (i >= n) break
  }
  const [header, ...rows] = lines
  const names = header.map((h) => h ?? 'NULL')
  for (const r of rows) {
    if (r.length !== names.length) throw new InvalidBodyError('All lines must have same number of fields')
  }
  return { header: names, rows }
}

/** CSV rows: the header names the columns (`columns=` is not read, as PostgREST). */
function csvRows (body: Buffer | null): RowsPayload {
  const { header, rows } = parseCsv(body === null ? '' : body.toString('utf8'))
  const objects = rows.map((r) => Object.fromEntries(header.map((h, k) => [h, r[k]])))
  return { kind: 'rows', isArray: true, rows: objects, keys: [...new Set(header)].sort(), json: JSON.stringify(objects) }
}

/** `a=1&b=2` with `+` as a space; a repeated name keeps every value in order. */
export function parseForm (body: Buffer | null): Array<[string, string[]]> {
  const text = body === null ? '' : body.toString('utf8')
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
function formRows (body: Buffer | null): RowsPayload {
  const row = bareRecord<string>()
  for (const [k, vs] of parseForm(body)) row[k] = vs[vs.length - 1]
  return { kind: 'rows', isArray: false, rows: [row], keys: Object.keys(row).sort(), json: JSON.stringify(row) }
}

/** The body of POST / PATCH / PUT on a table (spec §3.1). */
export function parseWritePayload (body: Buffer | null, contentType: MediaType | null, columns: readonly string[] | null): RowsPayload {
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

/** The body of `POST /rpc/<fn>` (spec §4.1, §5.5). An empty body counts as `{}`. */
export function parseCallPayload (body: Buffer | null, contentType: MediaType | null, columns: readonly string[] | null): CallPayload {
  const type = contentType?.type ?? 'application/json'
  switch (type) {
    case 'application/json': {
      if (columns !== null) {
        // As PostgREST: with `columns=` the body goes to Postgres unparsed (even when empty).
        const text = body === null ? '' : body.toString('utf8')
        return { kind: 'json-args', keys: columns, json: text, array: !looksLikeObject(text) }
      }
      if (body === null || body.toString('utf8').trim() === '') return { kind: 'json-args', keys: [], json: '{}' }
      const { value, text } = parseJson(body)
      if (Array.isArray(value)) {
        const rows = jsonRows(body, null)
        return { kind: 'json-args', keys: rows.keys, json: rows.json, array: true }
      }
      // As PostgREST (and writes): a bare JSON scalar is taken as an empty array.
      if (!isObject(value)) return { kind: 'json-args', keys: [], json: '[]', array: true }
      return { kind: 'json-args', keys: Object.keys(value), json: text }
    }
    case 'application/x-www-form-urlencoded': {
      const args = parseForm(body)
      // As PostgREST: the fields are the arguments (`columns=` is not read).
      return { kind: 'text-args', args }
    }
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
