// Answers compared with PostgREST 14 word for word: the Accept header read as PostgREST
// reads it (blanks removed, q then specificity order) and PGRST107 naming each type as
// PostgREST names it (the plan type with its for= and options), the Content-Type of the
// nulls=stripped types, Proxy-Status on errors, and the status line over a real socket.
import t from 'tap'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createWriteFixture } from '../../helpers/rest-writes.js'
import { RPC_SQL } from '../../helpers/rest-rpc.js'
import { startRestGateway } from '../../helpers/rest-gateway.js'

/** One raw HTTP/1.1 request: status line and headers as sent on the wire. */
async function raw(
  base: string,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<{
  status: number
  statusText: string
  headers: Record<string, string | string[] | undefined>
  body: string
}> {
  return await new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          statusText: res.statusMessage ?? '',
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      )
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

t.test('content negotiation and PGRST107', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })
  const unavailable = async (accept: string, path = '/authors'): Promise<unknown> => {
    const r = await fx.get(path, { accept })
    t.equal(r.status, 406, `${accept}: 406`)
    t.equal(r.headers['proxy-status'], 'PostgREST; error=PGRST107')
    return r.json()
  }
  const body = (list: string) => ({
    code: 'PGRST107',
    message: `None of these media types are available: ${list}`,
    details: null,
    hint: null,
  })

  t.test('the plan media type (not offered) as PostgREST names it', async (t) => {
    // postgrest-js .explain({ analyze: true, verbose: true }) sends this Accept.
    t.same(
      await unavailable('application/vnd.pgrst.plan+text; for="application/json"; options=analyze|verbose;'),
      body('application/vnd.pgrst.plan+text; for="application/json"; options=analyze|verbose'),
    )
    t.same(
      await unavailable('application/vnd.pgrst.plan'),
      body('application/vnd.pgrst.plan+text; for="application/json"'),
    )
    t.same(
      await unavailable('application/vnd.pgrst.plan+json;for="application/vnd.pgrst.object";options=wal|analyze|nope'),
      body('application/vnd.pgrst.plan+json; for="application/vnd.pgrst.object+json"; options=analyze|wal'),
    )
  })

  t.test('order: q-value, then specificity; other types as written', async (t) => {
    t.same(
      await unavailable('text/Unknown;q=0.9, application/vnd.pgrst.plan+json;for="text/csv"'),
      body('application/vnd.pgrst.plan+json; for="text/csv", text/Unknown'),
    )
    t.same(await unavailable('text/foo, image/png; x=1'), body('image/png;x=1, text/foo'), 'more parameters first')
    t.same(await unavailable('image/png;q=0.5;level=1, */x'), body('*/x, image/png'), '`;q=` cuts the entry')
  })

  t.test('an empty Accept accepts nothing', async (t) => {
    t.same(await unavailable(''), body(''))
    t.same(await unavailable('text/foo,'), body('text/foo, '), 'an empty entry is kept')
  })

  t.test('wildcard subtypes are not offered', async (t) => {
    t.same(await unavailable('application/*'), body('application/*'))
    t.same(await unavailable('text/*'), body('text/*'))
    t.same(await unavailable('text/*', '/'), body('text/*'), 'the OpenAPI root')
  })

  t.test('a more specific type wins at equal q', async (t) => {
    const r = await fx.get('/authors?id=eq.4', { accept: '*/*, application/vnd.pgrst.object+json;nulls=stripped' })
    t.equal(r.status, 200)
    t.equal(r.headers['content-type'], 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8')
    t.same(r.json(), { id: 4, name: 'Nobody' })
    const csv = await fx.get('/authors?select=id&id=eq.1', { accept: '*/*, text/csv' })
    t.same([csv.headers['content-type'], csv.body], ['text/csv; charset=utf-8', 'id\n1'])
  })

  t.test('nulls=stripped Content-Types', async (t) => {
    const arr = await fx.get('/authors?id=eq.4', { accept: 'application/vnd.pgrst.array+json;nulls=stripped' })
    t.equal(arr.headers['content-type'], 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8')
    t.same(arr.json(), [{ id: 4, name: 'Nobody' }])
  })
})

t.test('Prefer: timezone and max-affected as PostgREST 14 reads them', async (t) => {
  const fx = await createWriteFixture(t)
  const strictTz = await fx.get('/authors?select=id&limit=1', { prefer: 'handling=strict, timezone=Bad/Zone' })
  t.same(
    [strictTz.status, strictTz.json()],
    [
      400,
      {
        code: 'PGRST122',
        message: 'Invalid preferences given with handling=strict',
        details: 'Invalid preferences: timezone=Bad/Zone',
        hint: null,
      },
    ],
    'a zone the database does not know is an invalid preference',
  )
  const lenientTz = await fx.get('/authors?select=id&limit=1', { prefer: 'timezone=Bad/Zone' })
  t.same([lenientTz.status, lenientTz.headers['preference-applied']], [200, undefined], 'lenient: ignored, not echoed')
  const tz = await fx.get('/authors?select=born::timestamptz&id=eq.1', { prefer: 'timezone=America/Sao_Paulo' })
  t.same(
    [tz.status, tz.headers['preference-applied'], tz.json()],
    [200, 'timezone=America/Sao_Paulo', [{ born: '1929-10-21T00:00:00-03:00' }]],
  )
  const ma = await fx.get('/authors?select=id&limit=1', { prefer: 'handling=strict, max-affected=abc' })
  t.same(
    [ma.status, ma.headers['preference-applied']],
    [200, 'handling=strict'],
    'max-affected= is never an invalid preference',
  )
  const trailing = await fx.get('/authors?select=id&limit=1', { prefer: 'handling=strict, count=exact,' })
  t.same(
    [trailing.status, trailing.json().details],
    [400, 'Invalid preferences: '],
    'an empty token is one PostgREST does not know',
  )
})

t.test('a filter on an embedded resource other than is.null: an ordinary column filter, as PostgREST 14', async (t) => {
  // PostgREST 14 never raises PGRST120 (removed in v11.2): the name is a column of the
  // parent, so Postgres answers when there is none, and a column of that name is filtered.
  const fx = await createWriteFixture(t, {
    sql: "CREATE TABLE shelves (id int PRIMARY KEY, books int REFERENCES books (id)); INSERT INTO shelves VALUES (1, 1), (2, 4); SELECT platform.grant('SELECT', 'shelves', 'anon');",
  })
  const r = await fx.get('/authors?select=*,books(*)&books=eq.1')
  t.same(
    [r.status, r.json()],
    [400, { code: '42703', message: 'column authors.books does not exist', details: null, hint: null }],
  )
  t.equal(r.headers['proxy-status'], 'PostgREST; error=42703')
  const col = await fx.get('/shelves?select=id,books(title)&books=eq.4')
  t.same(
    [col.status, col.json()],
    [200, [{ id: 2, books: { title: 'Solaris' } }]],
    'a column named like the embed is filtered',
  )
})

t.test('reads: Preference-Applied and the 416 of an offset past the total', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })
  const r = await fx.get('/authors?select=id&limit=1', {
    prefer: 'count=exact, handling=lenient, tx=commit, return=representation',
  })
  t.equal(
    r.headers['preference-applied'],
    'count=exact, tx=commit, handling=lenient',
    'count, tx, handling and timezone are echoed on reads',
  )
  const beyond = await fx.get('/authors?select=id&offset=10', { prefer: 'count=exact' })
  t.equal(beyond.status, 416)
  t.same(beyond.json(), {
    code: 'PGRST103',
    message: 'Requested range not satisfiable',
    details: 'An offset of 10 was requested, but there are only 4 rows.',
    hint: null,
  })
  t.same(
    [
      beyond.headers['content-range'],
      beyond.headers['content-location'],
      beyond.headers['preference-applied'],
      beyond.headers['proxy-status'],
    ],
    ['*/4', '/authors?offset=10&select=id', 'count=exact', undefined],
    "answered with the read's headers, as PostgREST",
  )
  const csv = await fx.get('/authors?select=id&offset=10', { prefer: 'count=exact', accept: 'text/csv' })
  t.same([csv.status, csv.headers['content-type'], csv.json().code], [416, 'text/csv; charset=utf-8', 'PGRST103'])
  const call = await fx.get('/rpc/books_by?author=1&offset=10', { prefer: 'count=exact' })
  t.same(
    [call.status, call.headers['content-range'], call.headers['proxy-status'], call.json().details],
    [416, '*/3', undefined, 'An offset of 10 was requested, but there are only 3 rows.'],
  )
})

t.test('a plan type for a type not produced is passed over', async (t) => {
  const fx = await createWriteFixture(t, { rest: { plan_enabled: true } })
  const r = await fx.get('/authors?select=id&id=eq.1', {
    accept: 'application/vnd.pgrst.plan; for="text/unknown", application/json',
  })
  t.same([r.status, r.headers['content-type'], r.json()], [200, 'application/json; charset=utf-8', [{ id: 1 }]])
  const none = await fx.get('/authors', { accept: 'application/vnd.pgrst.plan; for="text/unknown"' })
  t.same(
    [none.status, none.json().message],
    [406, 'None of these media types are available: application/vnd.pgrst.plan+text; for="text/unknown"'],
  )
})

t.test('Proxy-Status and the status line on a real socket', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL })
  await fx.app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(fx.app.server.address() as AddressInfo).port}/${fx.database}`
  const notFound = await raw(base, '/nope')
  t.same([notFound.status, notFound.statusText], [404, 'Not Found'])
  t.equal(notFound.headers['proxy-status'], 'PostgREST; error=PGRST205')
  t.equal(notFound.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(notFound.headers['content-length'], String(Buffer.byteLength(notFound.body)))
  const pg = await raw(base, '/authors?id=eq.x')
  t.same([pg.status, pg.statusText, pg.headers['proxy-status']], [400, 'Bad Request', 'PostgREST; error=22P02'])
  const unacceptable = await raw(base, '/authors', { accept: 'image/png' })
  t.same(
    [unacceptable.status, unacceptable.statusText, unacceptable.headers['proxy-status']],
    [406, 'Not Acceptable', 'PostgREST; error=PGRST107'],
  )
  const trace = await raw(base, '/authors', {}, 'TRACE')
  t.same(
    [trace.status, trace.statusText, JSON.parse(trace.body)],
    [
      405,
      'Method Not Allowed',
      {
        code: 'PGRST117',
        message: 'Unsupported HTTP method: TRACE',
        details: null,
        hint: null,
      },
    ],
    'a method PostgREST does not route: PGRST117',
  )
  t.equal(trace.headers['proxy-status'], 'PostgREST; error=PGRST117')
  const onRpc = await raw(base, '/rpc/add_them', {}, 'PROPFIND')
  t.same([onRpc.status, JSON.parse(onRpc.body).message], [405, 'Cannot use the PROPFIND method on RPC'])
  const noPath = await raw(base, '/a/b/c', {}, 'TRACE')
  t.same([noPath.status, JSON.parse(noPath.body).code], [404, 'PGRST125'], 'the path is resolved first')
  const tenant = await raw(base.replace(fx.database, 'no_such_db'), '/authors')
  t.same(
    [tenant.status, tenant.headers['proxy-status']],
    [404, 'gatehouse; error=tenant_not_found'],
    "the engine's own codes name Gatehouse",
  )
})

t.test('supabase-js through the gateway', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rest-rpc' })
  const sb = stack.client()
  const explain = await sb.from('authors').select('id').explain({ analyze: true })
  t.same(
    [explain.status, explain.statusText, explain.error],
    [
      406,
      'Not Acceptable',
      {
        code: 'PGRST107',
        message:
          'None of these media types are available: application/vnd.pgrst.plan+text; for="application/json"; options=analyze',
        details: null,
        hint: null,
      },
    ],
    '.explain() on a database without plans: the plan type named as PostgREST names it',
  )
  const volatile = await sb.rpc('harmless_volatile', undefined, { get: true })
  t.same(
    [volatile.status, volatile.data, volatile.error],
    [200, 1, null],
    'GET on a volatile function that does not write',
  )
  const writer = await sb.rpc('add_item', { item_name: 'x' }, { get: true })
  t.same(
    [writer.status, writer.error?.code, writer.error?.message],
    [405, '25006', 'cannot execute INSERT in a read-only transaction'],
  )
})
