// Pure tests of request bodies (src/rest/api-request/payload.ts) and of the SQL a write
// renders (src/rest/query/mutate.ts): table-driven input -> rows/keys/errors, and the
// statement text and values for an insert, an upsert, an update and a delete (values only
// ever as parameters). No I/O.
import t from 'tap'
import { parseCallPayload, parseCsv, parseWritePayload, parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type MutatePlan } from '../../../src/rest/plan/index.js'
import { renderMutate } from '../../../src/rest/query/index.js'
import { buildSchemaCache } from '../../../src/rest/schema-cache/index.js'
import { isGatehouseError } from '../../../src/shared/index.js'

const JSON_CT = { type: 'application/json', params: {}, q: 1 }
const CSV_CT = { type: 'text/csv', params: {}, q: 1 }
const FORM_CT = { type: 'application/x-www-form-urlencoded', params: {}, q: 1 }

function failure(fn: () => unknown): { code: string; message: string } | null {
  try {
    fn()
  } catch (err) {
    if (isGatehouseError(err)) return { code: err.code, message: err.message }
    throw err
  }
  return null
}

t.test('JSON bodies', async (t) => {
  const ok: Array<[string, string | null, { isArray: boolean; keys: string[]; rows: number; json?: string }]> = [
    ['{"b":1,"a":2}', null, { isArray: false, keys: ['a', 'b'], rows: 1 }],
    ['[{"a":1,"b":2},{"b":3,"a":4}]', null, { isArray: true, keys: ['a', 'b'], rows: 2 }],
    ['[]', null, { isArray: true, keys: [], rows: 0 }],
    ['7', null, { isArray: true, keys: [], rows: 0, json: '[]' }],
    ['"text"', null, { isArray: true, keys: [], rows: 0, json: '[]' }],
    ['[{"a":1},{"b":2}]', 'a,b', { isArray: true, keys: ['a', 'b'], rows: 2 }],
    [
      '{"id": 12345678901234567890}',
      null,
      { isArray: false, keys: ['id'], rows: 1, json: '{"id": 12345678901234567890}' },
    ],
  ]
  for (const [body, columns, want] of ok) {
    const p = parseWritePayload(Buffer.from(body), JSON_CT, columns === null ? null : columns.split(','))
    t.same(
      { isArray: p.isArray, keys: p.keys, rows: p.rows.length },
      { isArray: want.isArray, keys: want.keys, rows: want.rows },
      body,
    )
    t.equal(p.json, want.json ?? body, `${body}: the client's text is bound`)
  }
  const bad: Array<[string | null, string]> = [
    [null, 'Empty or invalid json'],
    ['', 'Empty or invalid json'],
    ['{', 'Empty or invalid json'],
    ['[{"a":1},{"a":1,"b":2}]', 'All object keys must match'],
    ['[{"a":1},[1]]', 'All object keys must match'],
    ['[1,2]', 'All object keys must match'],
  ]
  for (const [body, message] of bad) {
    t.same(
      failure(() => parseWritePayload(body === null ? null : Buffer.from(body), JSON_CT, null)),
      { code: 'PGRST102', message },
      String(body),
    )
  }
  t.same(
    failure(() => parseWritePayload(Buffer.from('x'), { type: 'text/html', params: {}, q: 1 }, null)),
    { code: 'PGRST102', message: 'Content-Type not acceptable: text/html' },
  )
  t.same(parseWritePayload(Buffer.from('{"a":1}'), null, null).keys, ['a'], 'no Content-Type: JSON')
})

t.test('CSV and form bodies', async (t) => {
  t.same(parseCsv('a,b\n1,2\n'), { header: ['a', 'b'], rows: [['1', '2']] })
  t.same(parseCsv('a,b\r\n"x,y",NULL\r\n"",'), {
    header: ['a', 'b'],
    rows: [
      ['x,y', null],
      ['', ''],
    ],
  })
  t.same(parseCsv('a\n"he said ""hi"""'), { header: ['a'], rows: [['he said "hi"']] })
  t.same(
    parseCsv('a\n"NULL"'),
    { header: ['a'], rows: [[null]] },
    'a quoted NULL is null too (PostgREST compares the unquoted field)',
  )
  t.same(parseCsv('a\n"line\nbreak"'), { header: ['a'], rows: [['line\nbreak']] })
  t.same(parseCsv('a\n\n1\n""\n'), { header: ['a'], rows: [['1']] }, 'blank records are skipped, as cassava')
  t.same(
    parseCsv('a\n"open'),
    { header: ['a'], rows: [['ope']] },
    'as cassava: an unterminated quote loses its last character',
  )
  // parseCsv reads bytes, one character each (latin1), as PostgREST's parser does.
  const csvError = (text: string): unknown => failure(() => parseCsv(Buffer.from(text, 'utf8').toString('latin1')))
  t.same(csvError('a\n"x"y'), { code: 'PGRST102', message: 'parse error (string) at "y"' })
  t.same(
    csvError('a,b'),
    { code: 'PGRST102', message: 'parse error (not enough input) at ""' },
    'the header needs a line break',
  )
  t.same(csvError(''), { code: 'PGRST102', message: 'parse error (not enough input) at ""' })
  t.same(csvError('a\n"'), { code: 'PGRST102', message: 'parse error (Failed reading: trailing double quote) at ""' })
  t.same(
    csvError('a\rb'),
    { code: 'PGRST102', message: 'parse error (string) at "\\rb"' },
    "the unread input as Haskell's show writes it",
  )
  t.same(
    csvError('a\nx"\u00e9\u00019'),
    { code: 'PGRST102', message: 'parse error (string) at "\\"\\195\\169\\SOH9"' },
    'bytes, control names',
  )
  t.same(
    csvError('a\nx"\u00e99'),
    { code: 'PGRST102', message: 'parse error (string) at "\\"\\195\\169\\&9"' },
    'a digit after a numeric escape',
  )
  t.same(
    csvError('a\nx' + '"'.repeat(1) + 'y'.repeat(120)),
    { code: 'PGRST102', message: 'parse error (string) at "' + 'y'.repeat(99) + ' (truncated)' },
    'long input: 100 characters, unshown',
  )
  const short = parseWritePayload(Buffer.from('a,b\n1'), CSV_CT, null)
  t.same(
    { keys: short.keys, json: short.json },
    { keys: ['a'], json: '[{"a":"1"}]' },
    'a short first record names the columns',
  )
  const long = parseWritePayload(Buffer.from('a,b\n1,2,3\n4,5'), CSV_CT, null)
  t.same(
    { keys: long.keys, json: long.json },
    { keys: ['a', 'b'], json: '[{"a":"1","b":"2"},{"a":"4","b":"5"}]' },
    'extra fields are dropped',
  )
  t.same(
    failure(() => parseWritePayload(Buffer.from('a,b\n1,2\n3'), CSV_CT, null)),
    { code: 'PGRST102', message: 'All lines must have same number of fields' },
  )
  const csv = parseWritePayload(Buffer.from('b,a\n1,NULL\n'), CSV_CT, null)
  t.same(
    { keys: csv.keys, json: csv.json, isArray: csv.isArray },
    { keys: ['a', 'b'], json: '[{"b":"1","a":null}]', isArray: true },
  )
  const form = parseWritePayload(Buffer.from('a=1&b=x+y%21&a=2'), FORM_CT, null)
  t.same(
    { keys: form.keys, json: form.json, isArray: form.isArray },
    { keys: ['a', 'b'], json: '{"a":"2","b":"x y!"}', isArray: false },
  )
})

t.test('RPC bodies', async (t) => {
  t.same(parseCallPayload(null, null, null), { kind: 'json-args', keys: [], json: '{}' })
  t.same(parseCallPayload(Buffer.from('{"a":1,"b":2}'), JSON_CT, null), {
    kind: 'json-args',
    keys: ['a', 'b'],
    json: '{"a":1,"b":2}',
  })
  t.same(parseCallPayload(Buffer.from('{"a":1,"b":2}'), JSON_CT, ['a']), {
    kind: 'json-args',
    keys: ['a'],
    json: '{"a":1,"b":2}',
    array: false,
  })
  t.same(
    parseCallPayload(Buffer.from('{"a":'), JSON_CT, ['a']),
    { kind: 'json-args', keys: ['a'], json: '{"a":', array: false },
    'with columns=, the body is not parsed (Postgres reads it)',
  )
  t.same(
    parseCallPayload(Buffer.from('"x"'), JSON_CT, null),
    { kind: 'json-args', keys: [], json: '[]', array: true },
    'as PostgREST, a scalar is an empty array',
  )
  t.equal(
    failure(() => parseCallPayload(Buffer.from('[1]'), JSON_CT, null))?.message,
    'All object keys must match',
    'as PostgREST, arrays hold objects with the same keys',
  )
  t.same(parseCallPayload(Buffer.from('[{"b":1,"a":2}]'), JSON_CT, null), {
    kind: 'json-args',
    keys: ['a', 'b'],
    json: '[{"b":1,"a":2}]',
    array: true,
  })
  t.same(parseCallPayload(Buffer.from('a,b\n1,NULL'), { type: 'text/csv', params: {}, q: 1 }, null), {
    kind: 'json-args',
    keys: ['a', 'b'],
    json: '[{"a":"1","b":null}]',
    array: true,
    csv: true,
  })
  t.same(parseCallPayload(Buffer.from('v=1&v=2&w=3'), FORM_CT, null), {
    kind: 'text-args',
    args: [
      ['v', ['1', '2']],
      ['w', ['3']],
    ],
  })
  t.same(parseCallPayload(Buffer.from('hi'), { type: 'text/plain', params: {}, q: 1 }, null), {
    kind: 'raw',
    mime: 'text/plain',
    bytes: Buffer.from('hi'),
  })
  t.equal(failure(() => parseCallPayload(Buffer.from('{'), JSON_CT, null))?.code, 'PGRST102')
})

// A schema cache of one table: kv(k text PK, v text, n int default 0).
const cache = buildSchemaCache(
  {
    relations: [{ oid: 1, schema: 'public', name: 'kv', kind: 'r', mask: 28 }],
    columns: [
      {
        rel: 1,
        name: 'k',
        num: 1,
        type: 'text',
        base_type: 'text',
        nullable: false,
        default_expr: null,
        generated: false,
      },
      {
        rel: 1,
        name: 'v',
        num: 2,
        type: 'text',
        base_type: 'text',
        nullable: true,
        default_expr: null,
        generated: false,
      },
      {
        rel: 1,
        name: 'n',
        num: 3,
        type: 'integer',
        base_type: 'int4',
        nullable: true,
        default_expr: '0',
        insert_default: '0',
        generated: false,
      },
    ],
    constraints: [{ name: 'kv_pkey', type: 'p', rel: 1, frel: 0, cols: ['k'], fcols: [] }],
    views: new Map(),
    attnames: [],
    routines: [],
  },
  ['public'],
  1,
)

function statement(
  method: string,
  query: string,
  body: string | null,
  prefer = '',
): { text: string; values: readonly unknown[] } {
  const req = parseApiRequest(
    {
      method,
      path: '/kv',
      query,
      headers: { prefer, 'content-type': 'application/json' },
      body: body === null ? null : Buffer.from(body),
    },
    { schemas: ['public'] },
  )
  return renderMutate(planAction(req, cache, { maxRows: null }) as MutatePlan)
}

const TAIL =
  " SELECT null::bigint AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, ''::text AS body, nullif(pg_catalog.current_setting('response.headers', true), '') AS response_headers, nullif(pg_catalog.current_setting('response.status', true), '') AS response_status, null::int AS response_inserted FROM ( SELECT * FROM pgrst_source ) _postgrest_t"

t.test('the SQL of writes: text and values', async (t) => {
  const hostile = "'); DROP TABLE kv; --"
  const ins = statement('POST', '', JSON.stringify({ k: hostile, v: 'x' }))
  t.equal(
    ins.text,
    'WITH pgrst_payload AS ( SELECT $1::json AS json_data ), pgrst_source AS ( INSERT INTO "public"."kv" ("k", "v") SELECT pgrst_body."k", pgrst_body."v" FROM pgrst_payload, LATERAL json_populate_record(NULL::"public"."kv", pgrst_payload.json_data) AS pgrst_body RETURNING 1 )' +
      TAIL,
  )
  t.same(ins.values, [JSON.stringify({ k: hostile, v: 'x' })], 'the body is one parameter')

  const ups = statement('POST', '', '[{"k":"a","v":"b"}]', 'resolution=merge-duplicates')
  t.match(
    ups.text,
    'INSERT INTO "public"."kv" ("k", "v") SELECT pgrst_body."k", pgrst_body."v" FROM pgrst_payload, LATERAL json_populate_recordset(NULL::"public"."kv", pgrst_payload.json_data) AS pgrst_body WHERE pg_catalog.set_config(\'pgrst.inserted\'',
  )
  t.match(
    ups.text,
    ' ON CONFLICT ("k") DO UPDATE SET "k" = EXCLUDED."k", "v" = EXCLUDED."v" WHERE pg_catalog.set_config(\'pgrst.inserted\'',
  )
  t.match(ups.text, "nullif(pg_catalog.current_setting('pgrst.inserted', true), '')::int AS response_inserted")

  const put = statement('PUT', `k=eq.${encodeURIComponent(hostile)}`, JSON.stringify({ k: hostile }))
  t.match(put.text, ' AND pgrst_body."k" = $2 ON CONFLICT ("k") DO UPDATE SET "k" = EXCLUDED."k" WHERE ')
  t.same(put.values, [JSON.stringify({ k: hostile }), hostile])

  const upd = statement(
    'PATCH',
    `v=eq.${encodeURIComponent(hostile)}&order=k&limit=2`,
    '{"n":3}',
    'return=representation',
  )
  // As PostgREST 14: limit is not read on a write; order sorts the representation.
  t.equal(
    upd.text,
    'WITH pgrst_payload AS ( SELECT $1::json AS json_data ), pgrst_source AS ( UPDATE "public"."kv" SET "n" = pgrst_body."n" FROM pgrst_payload, LATERAL json_populate_record(NULL::"public"."kv", pgrst_payload.json_data) AS pgrst_body WHERE "public"."kv"."v" = $2 RETURNING "public"."kv".* ), pgrst_repr AS ( SELECT "kv".* FROM pgrst_source AS "kv" ORDER BY "kv"."k" ) SELECT null::bigint AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, coalesce(json_agg(_postgrest_t), \'[]\')::text AS body, nullif(pg_catalog.current_setting(\'response.headers\', true), \'\') AS response_headers, nullif(pg_catalog.current_setting(\'response.status\', true), \'\') AS response_status, null::int AS response_inserted FROM ( SELECT * FROM pgrst_repr ) _postgrest_t',
  )
  t.same(upd.values, ['{"n":3}', hostile])

  const del = statement('DELETE', 'k=in.(a,b)', null)
  t.equal(
    del.text,
    'WITH pgrst_source AS ( DELETE FROM "public"."kv" WHERE "public"."kv"."k" = ANY($1) RETURNING 1 )' + TAIL,
  )
  t.same(del.values, ['{"a","b"}'])

  const defaulted = statement('POST', 'columns=k,v,n', '[{"k":"a"},{"k":"b","n":1},{"k":"c"}]', 'missing=default')
  t.match(
    defaulted.text,
    'pgrst_source AS ( INSERT INTO "public"."kv" ("k", "v", "n") SELECT pgrst_body."k", pgrst_body."v", pgrst_body."n" FROM pgrst_payload, LATERAL (SELECT jsonb_agg(jsonb_build_object($2::text, (0)) || pgrst_elem) AS val FROM jsonb_array_elements(pgrst_payload.json_data::jsonb) AS pgrst_elem) AS pgrst_json_defs, LATERAL jsonb_populate_recordset(NULL::"public"."kv", pgrst_json_defs.val) AS pgrst_body RETURNING 1 )',
  )
  t.same(
    defaulted.values.slice(1),
    ['n'],
    'every row over the defaults of the listed columns that have one (as PostgREST)',
  )
})
