// Writes and request headers answered as PostgREST 14 answers them, over a real socket to
// the engine (and supabase-js through the gateway where it has a method): limit/offset
// not read on PATCH/DELETE, array bodies on PUT and PATCH, a `columns=` body that Postgres
// parses, CSV bodies, OPTIONS on a function, Bearer parsing, repeated headers, and the key
// order of error bodies.
import t from 'tap'
import { request } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { createWriteFixture, WRITE_SQL, type WriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { ALICE, FIXTURE_SQL } from '../../helpers/rest-fixture.js'
import { startRestGateway } from '../../helpers/rest-gateway.js'

interface RawResponse {
  status: number
  statusText: string
  headers: Record<string, string | string[] | undefined>
  body: string
  json: () => any
}

/** One HTTP/1.1 request on a real socket; a header given as an array is sent once per value. */
async function raw(
  base: string,
  path: string,
  opts: { method?: string; headers?: Record<string, string | string[]>; body?: string } = {},
): Promise<RawResponse> {
  return await new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method: opts.method ?? 'GET', headers: opts.headers ?? {} }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8')
        resolve({
          status: res.statusCode ?? 0,
          statusText: res.statusMessage ?? '',
          headers: res.headers,
          body,
          json: () => JSON.parse(body),
        })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(opts.body)
  })
}

async function engine(
  t: { teardown(fn: () => unknown): void },
  sql = '',
): Promise<{
  fx: WriteFixture
  base: string
  call: (
    method: string,
    path: string,
    headers?: Record<string, string | string[]>,
    body?: string,
  ) => Promise<RawResponse>
}> {
  const fx = await createWriteFixture(t, { sql: RPC_SQL + sql })
  await fx.app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(fx.app.server.address() as AddressInfo).port}/${fx.database}`
  return { fx, base, call: (method, path, headers = {}, body) => raw(base, path, { method, headers, body }) }
}

const JSON_CT = { 'content-type': 'application/json' }

t.test('limit and offset on PATCH and DELETE: not read, as PostgREST 14', async (t) => {
  const { fx, call } = await engine(t)
  await fx.ownerSql("INSERT INTO kv (k, v, n) VALUES ('a', 'x', 1), ('b', 'x', 2), ('c', 'x', 3), ('d', 'y', 4)")
  const patch = await call(
    'PATCH',
    '/kv?v=eq.x&limit=1&offset=1&order=n.desc&select=k,n',
    { ...JSON_CT, prefer: 'return=representation' },
    '{"v":"z"}',
  )
  t.same(
    [patch.status, patch.json()],
    [
      200,
      [
        { k: 'c', n: 3 },
        { k: 'b', n: 2 },
        { k: 'a', n: 1 },
      ],
    ],
    'every matching row, the representation in the asked order',
  )
  const noOrder = await call('DELETE', '/kv?v=eq.z&limit=1')
  t.equal(noOrder.status, 204, 'no PGRST109 without an order')
  t.same(await fx.ownerSql('SELECT k FROM kv ORDER BY k'), [{ k: 'd' }], 'every matching row deleted')
  const negative = await call('PATCH', '/kv?limit=-1', JSON_CT, '{"v":"q"}')
  t.same(
    [negative.status, negative.json()],
    [
      416,
      {
        code: 'PGRST103',
        details: 'Limit should be greater than or equal to zero.',
        hint: null,
        message: 'Requested range not satisfiable',
      },
    ],
    'a negative limit is still PGRST103',
  )
  const put = await call('PUT', '/kv?k=eq.d&offset=0', JSON_CT, '{"k":"d","v":"p"}')
  t.equal(put.status, 204, 'PUT: offset=0 is no range (PostgREST compares with the whole range)')
  const putLimit = await call('PUT', '/kv?k=eq.d&limit=1', JSON_CT, '{"k":"d","v":"p"}')
  t.same([putLimit.status, putLimit.json().code], [400, 'PGRST114'])

  const stack = await startRestGateway(t, { sql: FIXTURE_SQL + WRITE_SQL })
  await stack.owner("INSERT INTO kv (k, v) VALUES ('a', 'x'), ('b', 'x')")
  const sb = stack.client()
  const r = await sb.from('kv').update({ v: 'w' }).eq('v', 'x').order('k').limit(1).select('k')
  t.same(
    [r.status, r.error, r.data],
    [200, null, [{ k: 'a' }, { k: 'b' }]],
    'supabase-js .update().limit(1): both rows, as PostgREST 14',
  )
})

t.test('array bodies on PUT and PATCH, as PostgREST runs them', async (t) => {
  const { fx, call } = await engine(t)
  const put = await call(
    'PUT',
    '/kv?k=eq.a',
    { ...JSON_CT, prefer: 'return=representation' },
    '[{"k":"a","v":"1"},{"k":"b","v":"2"}]',
  )
  t.same([put.status, put.json()], [201, [{ k: 'a', v: '1', n: 0 }]], 'PUT: the rows matching the key are upserted')
  t.same(await fx.ownerSql('SELECT k FROM kv ORDER BY k'), [{ k: 'a' }])
  const none = await call('PUT', '/kv?k=eq.a', JSON_CT, '[{"k":"b","v":"2"}]')
  t.same(
    [none.status, none.json()],
    [
      400,
      {
        code: 'PGRST115',
        details: null,
        hint: null,
        message: 'Payload values do not match URL in primary key column(s)',
      },
    ],
  )
  const empty = await call('PUT', '/kv?k=eq.a', JSON_CT, '[]')
  t.same([empty.status, empty.json().code], [400, 'PGRST115'], 'an empty array upserts nothing')
  const twice = await call('PUT', '/kv?k=eq.a', JSON_CT, '[{"k":"a","v":"1"},{"k":"a","v":"2"}]')
  t.same(
    [twice.status, twice.json()],
    [
      500,
      {
        code: '21000',
        details: null,
        hint: 'Ensure that no rows proposed for insertion within the same command have duplicate constrained values.',
        message: 'ON CONFLICT DO UPDATE command cannot affect row a second time',
      },
    ],
    'the same key twice: Postgres refuses the upsert',
  )
  const mixed = await call('PUT', '/kv?k=eq.a', JSON_CT, '[{"k":"a"},{"v":"2"}]')
  t.same(
    [mixed.status, mixed.json()],
    [400, { code: 'PGRST102', details: null, hint: null, message: 'All object keys must match' }],
  )

  await fx.ownerSql("INSERT INTO kv (k, v) VALUES ('b', 'x'), ('c', 'x')")
  const patch = await call(
    'PATCH',
    '/kv?v=eq.x',
    { ...JSON_CT, prefer: 'return=representation' },
    '[{"v":"y"},{"v":"y"}]',
  )
  t.same([patch.status, patch.json().length], [200, 2], 'PATCH: UPDATE ... FROM the rows, each matched row once')
  t.same(await fx.ownerSql("SELECT k FROM kv WHERE v = 'y' ORDER BY k"), [{ k: 'b' }, { k: 'c' }])
  const patchEmpty = await call('PATCH', '/kv?v=eq.y', { ...JSON_CT, prefer: 'return=representation' }, '[]')
  t.same([patchEmpty.status, patchEmpty.json()], [200, []], 'an empty array updates nothing')
})

t.test('a JSON body with columns= is read by Postgres, as PostgREST passes it', async (t) => {
  const { fx, call } = await engine(t)
  const bad = await call('POST', '/kv?columns=k,v', JSON_CT, '{"k": "a", ')
  t.same(
    [bad.status, bad.json()],
    [
      400,
      {
        code: '22P02',
        details: 'The input string ended unexpectedly.',
        hint: null,
        message: 'invalid input syntax for type json',
      },
    ],
  )
  t.equal(bad.headers['proxy-status'], 'PostgREST; error=22P02')
  const token = await call('PATCH', '/kv?k=eq.a&columns=v', JSON_CT, '{"v": nope}')
  t.same(
    [token.status, token.json()],
    [
      400,
      { code: '22P02', details: 'Token "nope" is invalid.', hint: null, message: 'invalid input syntax for type json' },
    ],
  )
  const empty = await call('POST', '/kv?columns=k', JSON_CT)
  t.same(
    [empty.status, empty.json().code, empty.json().details],
    [400, '22P02', 'The input string ended unexpectedly.'],
    'an empty body too',
  )
  const rpc = await call('POST', '/rpc/add_them?columns=a,b', JSON_CT, '{"a": 1,')
  t.same([rpc.status, rpc.json().code], [400, '22P02'], 'a function call too')
  const noColumns = await call('POST', '/kv', JSON_CT, '{"k": "a", ')
  t.same(
    [noColumns.status, noColumns.json()],
    [400, { code: 'PGRST102', details: null, hint: null, message: 'Empty or invalid json' }],
    'without columns=: PGRST102',
  )
  const ok = await call(
    'POST',
    '/kv?columns=k',
    { ...JSON_CT, prefer: 'return=representation' },
    '[{"k":"a","v":"not a column read"},{"k":"b"}]',
  )
  t.same(
    [ok.status, ok.json()],
    [
      201,
      [
        { k: 'a', v: null, n: 0 },
        { k: 'b', v: null, n: 0 },
      ],
    ],
  )
  const csv = await call(
    'POST',
    '/kv?columns=k',
    { 'content-type': 'text/csv', prefer: 'return=representation' },
    'k,v\nc,read',
  )
  t.same(
    [csv.status, csv.json()],
    [201, [{ k: 'c', v: 'read', n: 0 }]],
    'CSV: the header names the columns, columns= is not read',
  )
  t.same(await fx.ownerSql('SELECT count(*)::int AS n FROM kv'), [{ n: 3 }])
})

t.test('error bodies: keys in the order aeson writes them (sorted), byte for byte', async (t) => {
  const { call } = await engine(
    t,
    `
CREATE FUNCTION raise_with (msg text, det text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE SQLSTATE 'PGRST' USING MESSAGE = msg, DETAIL = det; END $$;`,
  )
  const missing = await call('GET', '/nopq')
  t.equal(
    missing.body,
    '{"code":"PGRST205","details":null,"hint":"Perhaps you meant the table \'public.nopk\'","message":"Could not find the table \'public.nopq\' in the schema cache"}',
  )
  const pg = await call('GET', '/authors?id=eq.x')
  t.equal(
    pg.body,
    '{"code":"22P02","details":null,"hint":null,"message":"invalid input syntax for type integer: \\"x\\""}',
  )
  const range = await call('GET', '/authors?offset=100', { prefer: 'count=exact' })
  t.equal(
    range.body,
    '{"code":"PGRST103","details":"An offset of 100 was requested, but there are only 4 rows.","hint":null,"message":"Requested range not satisfiable"}',
    'the 416 body a response builds',
  )
  const raised = await call('POST', '/rpc/fail_custom')
  t.equal(raised.body, '{"code":"123","details":"custom details","hint":"custom hint","message":"Custom failure"}')
  const noRel = await call('GET', '/authors?select=*,nope(*)')
  t.match(
    noRel.body,
    /^\{"code":"PGRST200","details":"Searched for [^"]*","hint":(null|"[^"]*"),"message":"Could not find a relationship between 'authors' and 'nope' in the schema cache"\}$/,
  )

  // PostgREST parses MESSAGE's details/hint as strings and DETAIL's headers as an object of strings.
  const raise = async (msg: unknown, det: unknown): Promise<RawResponse> =>
    await call(
      'POST',
      '/rpc/raise_with',
      JSON_CT,
      JSON.stringify({ msg: JSON.stringify(msg), det: JSON.stringify(det) }),
    )
  const numberDetails = await raise({ code: 'X1', message: 'm', details: 5 }, { status: 409, headers: {} })
  t.same(
    [numberDetails.status, numberDetails.json().code, numberDetails.json().details],
    [500, 'PGRST121', 'Invalid JSON value for MESSAGE: \'{"code":"X1","message":"m","details":5}\''],
  )
  const noHeaders = await raise({ code: 'X1', message: 'm' }, { status: 409 })
  t.same(
    [noHeaders.status, noHeaders.json().details],
    [500, 'Invalid JSON value for DETAIL: \'{"status":409}\''],
    'headers is obligatory',
  )
  const numberHeader = await raise({ code: 'X1', message: 'm' }, { status: 409, headers: { 'X-N': 1 } })
  t.same([numberHeader.status, numberHeader.json().code], [500, 'PGRST121'], 'header values are strings')
  const badText = await raise({ code: 'X1', message: 'm' }, { status: 409, headers: {}, status_text: 7 })
  t.same([badText.status, badText.json().code], [500, 'PGRST121'], 'status_text is a string')
  // Deliberate: only statuses HTTP carries, and well-formed single-line headers.
  const farStatus = await raise({ code: 'X1', message: 'm' }, { status: 700, headers: {} })
  t.same([farStatus.status, farStatus.json().code], [500, 'PGRST121'], 'a status outside 100-599')
  const badHeader = await raise(
    { code: 'X1', message: 'm' },
    { status: 409, headers: { 'X-Ok': 'y', 'X-Bad': 'a\r\nSet-Cookie: x=1', 'Bad Name': 'z' } },
  )
  t.same(
    [badHeader.status, badHeader.headers['x-ok'], badHeader.headers['x-bad'], badHeader.headers['set-cookie']],
    [409, 'y', undefined, undefined],
    'a header that would split the response is dropped',
  )
  const ok = await raise(
    { code: 'X1', message: 'm', details: null, hint: 'h' },
    { status: 418, headers: { 'X-A': 'b' }, status_text: 'Short' },
  )
  t.same(
    [ok.status, ok.statusText, ok.headers['x-a'], ok.body],
    [418, 'Short', 'b', '{"code":"X1","details":null,"hint":"h","message":"m"}'],
  )
})

t.test('OPTIONS on a function is planned as PostgREST plans it: Accept and Prefer are checked', async (t) => {
  const { call } = await engine(
    t,
    "CREATE FUNCTION all_books() RETURNS SETOF books LANGUAGE sql STABLE AS 'SELECT * FROM books';",
  )
  const ok = await call('OPTIONS', '/rpc/no_args', { accept: 'application/json' })
  t.same([ok.status, ok.headers.allow], [200, 'OPTIONS,GET,HEAD,POST'])
  const accept = await call('OPTIONS', '/rpc/no_args', { accept: 'image/png' })
  t.same(
    [accept.status, accept.json()],
    [
      406,
      { code: 'PGRST107', details: null, hint: null, message: 'None of these media types are available: image/png' },
    ],
  )
  const csvScalar = await call('OPTIONS', '/rpc/no_args', { accept: 'text/csv' })
  t.same([csvScalar.status, csvScalar.json().code], [406, 'PGRST107'], 'CSV of a scalar function')
  const strict = await call('OPTIONS', '/rpc/no_args', { prefer: 'handling=strict, nope' })
  t.same(
    [strict.status, strict.json()],
    [
      400,
      {
        code: 'PGRST122',
        details: 'Invalid preferences: nope',
        hint: null,
        message: 'Invalid preferences given with handling=strict',
      },
    ],
  )
  const maxAffected = await call('OPTIONS', '/rpc/no_args', { prefer: 'handling=strict, max-affected=1' })
  t.same(
    [maxAffected.status, maxAffected.json().code],
    [400, 'PGRST128'],
    'max-affected on a function returning one value',
  )
  const select = await call('OPTIONS', '/rpc/all_books?select=nope(*)')
  t.same([select.status, select.json().code], [400, 'PGRST200'], 'the select is planned')
  const lenient = await call('OPTIONS', '/rpc/no_args', { prefer: 'nope' })
  t.equal(lenient.status, 200)

  const table = await call('OPTIONS', '/authors', { accept: 'image/png', prefer: 'handling=strict, nope' })
  t.same(
    [table.status, table.headers.allow],
    [200, 'OPTIONS,GET,HEAD,POST,PUT,PATCH,DELETE'],
    'OPTIONS on a table checks neither',
  )
  const root = await call('OPTIONS', '/', { prefer: 'handling=strict, nope' })
  t.equal(root.status, 200, 'nor OPTIONS on the root')
  const openapi = await call('GET', '/', { prefer: 'handling=strict, nope' })
  t.equal(openapi.status, 200, 'the OpenAPI document ignores Prefer')
})

t.test('handling=strict is checked where PostgREST checks it: after the table and the select', async (t) => {
  const { call } = await engine(t)
  const strict = { prefer: 'handling=strict, nope' }
  const table = await call('GET', '/nope', strict)
  t.same([table.status, table.json().code], [404, 'PGRST205'], 'an unknown table first')
  const select = await call('GET', '/authors?select=nope(*)', strict)
  t.same([select.status, select.json().code], [400, 'PGRST200'], 'then the select')
  const read = await call('GET', '/authors', strict)
  t.same([read.status, read.json().code], [400, 'PGRST122'])
  const write = await call('POST', '/kv', { ...JSON_CT, ...strict }, '{"zz":1}')
  t.same([write.status, write.json().code], [400, 'PGRST204'], 'a write: its columns first')
  const writeAccept = await call(
    'POST',
    '/kv',
    { ...JSON_CT, prefer: 'handling=strict, nope', accept: 'image/png' },
    '{"k":"a"}',
  )
  t.same([writeAccept.status, writeAccept.json().code], [400, 'PGRST122'], 'a write: Prefer before Accept')
  const fn = await call('GET', '/rpc/nope', strict)
  t.same([fn.status, fn.json().code], [404, 'PGRST202'], 'a call: the function first')
  const fnAccept = await call('GET', '/rpc/no_args', { prefer: 'handling=strict, nope', accept: 'image/png' })
  t.same([fnAccept.status, fnAccept.json().code], [406, 'PGRST107'], 'a call: Accept before Prefer')
})

t.test('Authorization: Bearer read as PostgREST reads it (wai-extra)', async (t) => {
  const { fx, call } = await engine(t)
  const token = await fx.token('auth', { sub: ALICE })
  const as = async (authorization: string): Promise<RawResponse> => await call('GET', '/rpc/whoami', { authorization })
  for (const h of [
    `Bearer ${token}`,
    `bearer ${token}`,
    `BEARER  ${token}`,
    `Bearer\t${token}`,
    `Bearer\u00a0${token}`,
  ]) {
    const r = await as(h)
    t.same([r.status, r.json().uid], [200, ALICE], JSON.stringify(h.replace(token, '<token>')))
  }
  const empty = await as('Bearer')
  t.same([empty.status, empty.json().message], [401, 'Empty JWT is sent in Authorization header'])
  const trailingNbsp = await as(`Bearer ${token}\u00a0`)
  t.same([trailingNbsp.status, trailingNbsp.json().code], [401, 'PGRST301'], 'NBSP after the token is part of it')
  const leadingNbsp = await as(`\u00a0Bearer ${token}`)
  t.same([leadingNbsp.status, leadingNbsp.json().uid], [200, null], 'NBSP before the scheme: not Bearer, so anonymous')
  const glued = await as(`Bearer${token}`)
  t.same([glued.status, glued.json().uid], [200, null], 'no blank after Bearer: anonymous')
  const basic = await as('Basic dXNlcjpwYXNz')
  t.equal(basic.status, 200, 'another scheme: anonymous')
})

t.test(
  'repeated headers: the first Accept, Range, profile and Cookie line, every Prefer line (as Warp/Wai and PostgREST)',
  async (t) => {
    const { base, call } = await engine(
      t,
      `
CREATE FUNCTION echo_request() RETURNS json LANGUAGE sql STABLE AS $$
  SELECT json_build_object('accept', current_setting('request.headers', true)::json->>'accept',
    'x_twice', current_setting('request.headers', true)::json->>'x-twice',
    'cookies', current_setting('request.cookies', true)::json)
$$;`,
    )
    const accept = await call('GET', '/authors?select=id&id=eq.1', { accept: ['text/csv', 'application/json'] })
    t.same(
      [accept.status, accept.headers['content-type'], accept.body],
      [200, 'text/csv; charset=utf-8', 'id\n1'],
      'the first Accept line decides',
    )
    const refused = await call('GET', '/authors?select=id', { accept: ['image/png', 'application/json'] })
    t.same(
      [refused.status, refused.json().message],
      [406, 'None of these media types are available: image/png'],
      'later lines are not read',
    )
    const range = await call('GET', '/authors?select=id&order=id', { range: ['0-0', '1-2'] })
    t.same(
      [range.status, range.headers['content-range'], range.json()],
      [200, '0-0/*', [{ id: 1 }]],
      'the first Range line',
    )
    const prefer = await call('GET', '/authors?select=id', { prefer: ['count=exact', 'handling=strict, nope'] })
    t.same([prefer.status, prefer.json().details], [400, 'Invalid preferences: nope'], 'every Prefer line is read')
    const counted = await call('GET', '/authors?select=id&limit=1', { prefer: ['handling=lenient', 'count=exact'] })
    t.equal(counted.headers['content-range'], '0-0/4')
    const echo = await call('GET', '/rpc/echo_request', {
      accept: ['application/json', 'text/plain'],
      'x-twice': ['one', 'two'],
    })
    t.same(
      echo.json(),
      { accept: 'text/plain', x_twice: 'two', cookies: {} },
      'request.headers keeps the last line of a repeated header',
    )
    // Node's client joins cookie lines itself: two Cookie lines go out on a bare socket.
    const wire = await new Promise<string>((resolve, reject) => {
      const u = new URL(base)
      const s = connect(Number(u.port), u.hostname, () => {
        s.write(
          `GET ${u.pathname}/rpc/echo_request HTTP/1.1\r\nHost: x\r\nCookie: a=1\r\nCookie: b=2\r\nConnection: close\r\n\r\n`,
        )
      })
      let out = ''
      s.on('data', (c: Buffer) => {
        out += c.toString('utf8')
      })
      s.on('end', () => resolve(out))
      s.on('error', reject)
    })
    t.match(wire, /"cookies" : \{"a":"1"\}\}$/, 'request.cookies reads the first Cookie line')
  },
)

t.test('CSV bodies as PostgREST reads them (cassava): its texts and its leniencies', async (t) => {
  const { fx, call } = await engine(t)
  const csv = async (body: string, path = '/kv'): Promise<RawResponse> =>
    await call('POST', path, { 'content-type': 'text/csv', prefer: 'return=representation' }, body)
  const noBreak = await csv('k,v')
  t.same(
    [noBreak.status, noBreak.json()],
    [400, { code: 'PGRST102', details: null, hint: null, message: 'parse error (not enough input) at ""' }],
    'a header without a line break',
  )
  const empty = await csv('')
  t.same([empty.status, empty.json().message], [400, 'parse error (not enough input) at ""'])
  const junk = await csv('k,v\n"a"b,c')
  t.same([junk.status, junk.json().message], [400, 'parse error (string) at "b,c"'], 'text after a closing quote')
  const few = await csv('k,v\na,1\nb')
  t.same([few.status, few.json().message], [400, 'All lines must have same number of fields'])
  t.same(await fx.ownerSql('SELECT count(*)::int AS n FROM kv'), [{ n: 0 }], 'nothing written')

  const lenient = await csv('k,v\n\na,1,extra\n"b","NULL"\n\n"c""d",\u00e9\n')
  t.same(
    [lenient.status, lenient.json()],
    [
      201,
      [
        { k: 'a', v: '1', n: 0 },
        { k: 'b', v: null, n: 0 },
        { k: 'c"d', v: '\u00e9', n: 0 },
      ],
    ],
    'blank lines skipped, extra fields dropped, a quoted NULL is null, UTF-8 kept',
  )
  const unterminated = await csv('k\n"xyz')
  t.same(
    [unterminated.status, unterminated.json()],
    [201, [{ k: 'xy', v: null, n: 0 }]],
    'an unterminated quote ends the field one character early, as cassava',
  )
})

t.test('through the gateway: repeated Accept and Prefer lines reach the engine as sent', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rest' })
  const base = `${stack.gatewayUrl}/${stack.database}/rest/v1`
  const apikey = stack.tenant.file.keys.public
  const refused = await raw(base, '/authors?select=id', {
    headers: { apikey, accept: ['image/png', 'application/json'] },
  })
  t.same(
    [refused.status, refused.json().message],
    [406, 'None of these media types are available: image/png'],
    'the first Accept line decides',
  )
  const csv = await raw(base, '/authors?select=id&id=eq.1', {
    headers: { apikey, accept: ['text/csv', 'application/json'] },
  })
  t.same([csv.status, csv.body], [200, 'id\n1'])
  const prefer = await raw(base, '/authors?select=id&limit=1', {
    headers: { apikey, prefer: ['handling=lenient', 'count=exact'] },
  })
  t.same([prefer.status, prefer.headers['content-range']], [206, '0-0/4'], 'every Prefer line is read')
})

t.test(
  'Location of a view over a join: the primary keys of both tables, a null one as is.null (PostgREST InsertSpec)',
  async (t) => {
    const fx = await createWriteFixture(t, {
      sql: `
    CREATE TABLE pk_left (k1 int PRIMARY KEY);
    CREATE TABLE pk_right (k2 int PRIMARY KEY);
    CREATE VIEW pk_both AS SELECT * FROM pk_left, pk_right;
    CREATE FUNCTION pk_both_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO pk_left VALUES (NEW.k1) ON CONFLICT DO NOTHING;
      INSERT INTO pk_right VALUES (NEW.k2) ON CONFLICT DO NOTHING;
      RETURN NEW;
    END $$;
    CREATE TRIGGER ins INSTEAD OF INSERT ON pk_both FOR EACH ROW EXECUTE FUNCTION pk_both_insert();
    CREATE TABLE sponsors_x (id int PRIMARY KEY);
    CREATE TABLE racers_x (id int PRIMARY KEY, sponsor_id int REFERENCES sponsors_x (id));
    CREATE VIEW racers_sponsors AS SELECT r.id, s.id AS sponsor_id FROM racers_x r LEFT JOIN sponsors_x s ON r.sponsor_id = s.id;
    CREATE RULE racers_sponsors_ins AS ON INSERT TO racers_sponsors DO INSTEAD
      INSERT INTO racers_x (id, sponsor_id) VALUES (NEW.id, NEW.sponsor_id) RETURNING id, sponsor_id;
    GRANT SELECT, INSERT ON pk_both, racers_sponsors TO PUBLIC;`,
    })
    const both = await fx.call('POST', '/pk_both', {
      body: { k1: 1, k2: 2 },
      headers: { prefer: 'return=headers-only' },
      role: 'svc',
    })
    t.equal(both.status, 201)
    t.equal(both.headers.location, '/pk_both?k1=eq.1&k2=eq.2')
    const nullKey = await fx.call('POST', '/racers_sponsors', {
      body: { id: 1 },
      headers: { prefer: 'return=headers-only' },
      role: 'svc',
    })
    t.equal(nullKey.status, 201)
    t.equal(nullKey.headers.location, '/racers_sponsors?id=eq.1&sponsor_id=is.null')
  },
)
