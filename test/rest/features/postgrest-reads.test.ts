// Reads compared with PostgREST 14's own answers (its spec tests and the doctests of
// ApiRequest/QueryParams.hs), through supabase-js and the gateway over real sockets.
// Each test names what it compared.
import t from 'tap'
import { startRestGateway, type RestGatewayStack } from '../../helpers/rest-gateway.js'

/** A raw GET through the gateway with the public key (what supabase-js cannot spell). */
async function get(
  stack: RestGatewayStack,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: string; json: () => any }> {
  const res = await fetch(`${stack.gatewayUrl}/${stack.database}/rest/v1${path}`, {
    headers: { apikey: stack.tenant.file.keys.public, ...headers },
  })
  const body = await res.text()
  return { status: res.status, headers: res.headers, body, json: () => JSON.parse(body) }
}

const parseError = (what: string, input: string, column: number, details: string): unknown => ({
  code: 'PGRST100',
  message: `"failed to parse ${what} (${input})" (line 1, column ${column})`,
  details,
  hint: null,
})

t.test('reads as PostgREST 14 answers them', async (t) => {
  const stack = await startRestGateway(t, { shared: 'rest-embed' })
  const sb = stack.client()

  // The query grammar as PostgREST 14 parses it (QueryParams.hs, Parsec).
  t.test('select: what follows a complete list is ignored (SpreadQueriesSpec, AggregateFunctionsSpec)', async (t) => {
    const r = await sb.from('books').select('id,authors(name))').eq('id', 1)
    t.same([r.status, r.error, r.data], [200, null, [{ id: 1, authors: { name: 'Ursula Le Guin' } }]])
    const star = await get(stack, '/authors?select=*!hint&id=eq.4')
    t.same(
      [star.status, star.json()],
      [200, [{ id: 4, name: 'Nobody', country: null, profile: null, born: null }]],
      'no item parses: an empty select, so every column',
    )
    const inner = await sb.from('books').select('id,tags(name]').eq('id', 1)
    t.same(
      [inner.status, inner.error],
      [
        400,
        parseError(
          'select parameter',
          'id,tags(name]',
          13,
          'unexpected \']\' expecting letter, digit, "-", "->>", "->", "::", ".", ")", "," or end of input',
        ),
      ],
      'inside an embed the list must end: the character eof refused is shown in single quotes',
    )
  })

  t.test('filters: operator errors at the position Parsec reports (QueryParams.hs doctests)', async (t) => {
    const noop = await sb
      .from('books')
      .select('id')
      .filter('id', 'noop' as 'eq', 0)
    t.same(
      [noop.status, noop.error],
      [400, parseError('filter', 'noop.0', 1, 'unexpected "o" expecting "not" or operator (eq, gt, ...)')],
    )
    const nil = await sb.from('books').select('id').filter('id', 'is', 'nil')
    t.same(
      [nil.status, nil.error],
      [
        400,
        parseError('filter', 'is.nil', 5, 'unexpected "i" expecting isVal: (null, not_null, true, false, unknown)'),
      ],
    )
    const quant = await get(stack, '/books?select=id&id=eq().1')
    t.same(
      [quant.status, quant.json()],
      [400, parseError('filter', 'eq().1', 4, 'unexpected ")" expecting operator (eq, gt, ...)')],
    )
    const isx = await get(stack, '/books?select=id&year=is.nullx')
    t.same([isx.status, isx.json()], [200, [{ id: 7 }]], 'after is.null the rest is ignored')
  })

  t.test('logic trees: a trailing parenthesis is ignored (AndOrParamsSpec "can handle eq and neq")', async (t) => {
    const r = await sb.from('books').select('id').or('id.eq.1,id.eq.2)').order('id')
    t.same([r.status, r.error, r.data], [200, null, [{ id: 1 }, { id: 2 }]])
    const bad = await get(stack, '/books?select=id&or=(id.eq.1,not.xor(id.eq.2))')
    t.same(
      [bad.status, bad.json()],
      [
        400,
        parseError('logic tree', '(id.eq.1,not.xor(id.eq.2))', 16, 'unexpected "x" expecting logic operator (and, or)'),
      ],
    )
  })

  t.test('order: errors as QuerySpec "gives meaningful error message on bad syntax"', async (t) => {
    const r = await get(stack, '/books?order=id.asc.nullslasttt')
    t.same(
      [r.status, r.json()],
      [400, parseError('order', 'id.asc.nullslasttt', 17, 'unexpected \'t\' expecting "," or end of input')],
    )
    const js = await sb
      .from('books')
      .select('id')
      .order('id.descc' as 'id')
    t.same(
      [js.status, js.error],
      [400, parseError('order', 'id.descc.asc', 8, 'unexpected \'c\' expecting delimiter (.), "," or end of input')],
    )
  })

  t.test('query string: `;` separates parameters and limit reads as a Haskell Integer', async (t) => {
    const r = await get(stack, '/books?select=id;id=lt.3;order=id')
    t.same([r.status, r.json()], [200, [{ id: 1 }, { id: 2 }]])
    const negative = await get(stack, '/books?select=id&offset=-4&order=id&limit=2')
    t.same(
      [negative.status, negative.json(), negative.headers.get('content-range')],
      [200, [{ id: 1 }, { id: 2 }], '0-1/*'],
      'a negative offset is a no-op (RangeSpec "succeeds if offset is negative as a no-op")',
    )
    const paren = await get(stack, '/books?select=id&order=id&limit=(2)', { prefer: 'count=exact' })
    t.same([paren.status, paren.headers.get('content-range')], [206, '0-1/7'])
  })

  t.test(
    'count=estimated without max_rows is the larger of exact and planned (RelatedQueriesSpec "works with count=estimated")',
    async (t) => {
      const planned = await sb.from('books').select('id', { count: 'planned' }).limit(1)
      t.ok((planned.count ?? 0) > 7, 'the planner guesses more rows than the 7 there are (a table never analyzed)')
      const estimated = await sb.from('books').select('id', { count: 'estimated' }).limit(1)
      t.same([estimated.status, estimated.count], [206, planned.count])
      const embedded = await get(stack, '/authors?select=name,books()&books=not.is.null&limit=2', {
        prefer: 'count=estimated',
      })
      const plannedEmbedded = await get(stack, '/authors?select=name,books()&books=not.is.null&limit=2', {
        prefer: 'count=planned',
      })
      t.same(
        [embedded.status, embedded.headers.get('content-range')],
        [206, plannedEmbedded.headers.get('content-range')],
      )
    },
  )

  t.test(
    'response.headers naming a header twice sends it twice (RpcSpec "can set the same http header twice")',
    async (t) => {
      const r = await fetch(`${stack.gatewayUrl}/${stack.database}/rest/v1/rpc/set_cookie_twice`, {
        headers: { apikey: stack.tenant.file.keys.public },
      })
      t.same(
        [r.status, r.headers.getSetCookie(), r.headers.get('content-range')],
        [204, ['sessionid=38afes7a8; HttpOnly; Path=/', 'id=a3fWa; Secure; HttpOnly'], 'mine'],
        "and a header it names replaces the engine's",
      )
    },
  )

  t.test(
    'a repeated argument of a GET call: the last value counts (RpcSpec "returns last value for repeated params without VARIADIC")',
    async (t) => {
      const r = await get(stack, '/rpc/sayhello?name=ignored&name=world')
      t.same([r.status, r.json()], [200, 'Hello, world'])
    },
  )

  t.test(
    'a function with OUT, INOUT or TABLE parameters answers rows (RpcSpec "returns an object result when there is a single OUT param")',
    async (t) => {
      const out = await sb.rpc('single_out_param', { num: 5 })
      t.same([out.status, out.error, out.data], [200, null, { num_plus_one: 6 }])
      const inout = await sb.rpc('single_inout_param', { num: 2 }, { get: true })
      t.same([inout.status, inout.error, inout.data], [200, null, { num: 3 }])
      const table = await sb.rpc('single_column_table_return')
      t.same([table.status, table.error, table.data], [200, null, [{ a: 'A' }]])
    },
  )

  t.test('Content-Location as PostgREST writes it (QuerySpec "Canonical location")', async (t) => {
    const odd = await get(stack, '/Odd%20%22Name%22%20table?select=weird%20col&weird%20col=is.null')
    t.same(
      [odd.status, odd.headers.get('content-location')],
      [200, '/Odd "Name" table?limit=1000&select=weird%20col&weird%20col=is.null'],
      "the relation name as it is, the parameters (with the gateway's limit) sorted and encoded",
    )
    const utf8 = await get(stack, '/authors?select=id&name=eq.%C3%A9')
    t.same(
      [utf8.status, utf8.headers.get('content-location')],
      [200, '/authors?limit=1000&name=eq.%C3%83%C2%A9&select=id'],
      "each byte of a non-ASCII character encoded as a character of its own (the HTTP package's urlEncode over bytes)",
    )
  })

  t.test('a call hands its read the columns it names (QuerySpec "overloaded computed column on rpc")', async (t) => {
    const computed = await sb.rpc('books_of_year', { y: 1968 }).select('id, book_label')
    t.same(
      [computed.status, computed.error, computed.data],
      [200, null, [{ id: 1, book_label: 'A Wizard of Earthsea!' }]],
      "an overloaded computed column read off the function's own row",
    )
    const embed = await sb.rpc('books_of_year', { y: 1968 }).select('title, authors(name)')
    t.same(
      [embed.status, embed.error, embed.data],
      [200, null, [{ title: 'A Wizard of Earthsea', authors: { name: 'Ursula Le Guin' } }]],
      'with the columns its embeds join on',
    )
    const missing = await sb.rpc('books_of_year', { y: 1968 }).select('id, nope')
    t.same(
      [missing.status, missing.error],
      [400, { code: '42703', message: 'column pgrst_call.nope does not exist', details: null, hint: null }],
    )
  })

  t.test(
    "an embed finds targets in the request's schema only (PostgREST keys relationships by the target's schema)",
    async (t) => {
      const two = await startRestGateway(t, {
        rest: { schemas: ['public', 'other'] },
        sql: `CREATE SCHEMA other;
        CREATE TABLE other.shelves (id int PRIMARY KEY, label text);
        CREATE TABLE public.boxes (id int PRIMARY KEY, shelves_id int REFERENCES other.shelves (id));
        INSERT INTO other.shelves VALUES (1, 'top'); INSERT INTO public.boxes VALUES (1, 1);
        DO $$ BEGIN EXECUTE format('GRANT USAGE ON SCHEMA other TO %I', platform.role('anon')); END $$;
        SELECT platform.grant('SELECT', 'public.boxes', 'anon');
        SELECT platform.grant('SELECT', 'other.shelves', 'anon');`,
      })
      const r = await two.client().from('boxes').select('id, shelves(label)')
      t.same(
        [r.status, r.error],
        [
          400,
          {
            code: 'PGRST200',
            message: "Could not find a relationship between 'boxes' and 'shelves' in the schema cache",
            details:
              "Searched for a foreign key relationship between 'boxes' and 'shelves' in the schema 'public', but no matches were found.",
            hint: null,
          },
        ],
      )
    },
  )

  t.test(
    'PGRST201 lists candidates in PostgREST\'s order (EmbedDisambiguationSpec "errs on an ambiguous embed that has a circular reference")',
    async (t) => {
      const r = await sb.from('agents').select('*, depts(*)')
      t.same(
        [r.status, r.statusText, r.error],
        [
          300,
          'Multiple Choices',
          {
            code: 'PGRST201',
            details: [
              {
                cardinality: 'one-to-many',
                embedding: 'agents with depts',
                relationship: 'depts_head_id_fkey using agents(id) and depts(head_id)',
              },
              {
                cardinality: 'many-to-one',
                embedding: 'agents with depts',
                relationship: 'agents_dept_id_fkey using agents(dept_id) and depts(id)',
              },
            ],
            hint: "Try changing 'depts' to one of the following: 'depts!depts_head_id_fkey', 'depts!agents_dept_id_fkey'. Find the desired relationship in the 'details' key.",
            message: "Could not embed because more than one relationship was found for 'agents' and 'depts'",
          },
        ],
        'one-to-many before many-to-one, as PostgREST sorts its relationships',
      )
    },
  )

  t.test(
    'a view column exposing a key twice gives a relationship per column (EmbedDisambiguationSpec i2459)',
    async (t) => {
      const byCol = await sb.from('i2459_v1').select('*, i2459_v2!t1_id2(*)')
      t.same(
        [byCol.status, byCol.error, byCol.data],
        [200, null, [{ id: 1, i2459_v2: [{ t1_id1: 1, t1_id2: 1 }] }]],
        'either column names it',
      )
      const back = await sb.from('i2459_v2').select('t1_id1, i2459_v1!t1_id1(id)')
      t.same([back.status, back.error, back.data], [200, null, [{ t1_id1: 1, i2459_v1: { id: 1 } }]])
      const ambiguous = await sb.from('i2459_v2').select('*, i2459_v1(*)')
      t.same(
        [ambiguous.status, ambiguous.error?.code, ambiguous.error?.details],
        [
          300,
          'PGRST201',
          [
            {
              cardinality: 'many-to-one',
              embedding: 'i2459_v2 with i2459_v1',
              relationship: 'i2459_t2_t1_id_fkey using i2459_v2(t1_id1) and i2459_v1(id)',
            },
            {
              cardinality: 'many-to-one',
              embedding: 'i2459_v2 with i2459_v1',
              relationship: 'i2459_t2_t1_id_fkey using i2459_v2(t1_id2) and i2459_v1(id)',
            },
          ],
        ],
      )
    },
  )
})
